"""Webhooks: a project's audit events, signed and POSTed to its endpoints, retried with backoff."""
