"""A backtest's review: verdicts bound to what was replayed, the tally against the approval policy."""
