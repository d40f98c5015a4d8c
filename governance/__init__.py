"""The governance app: frame proposals, their reviews and promotion, API tokens, webhooks."""
