"""Backtest runs and their results (filled in by the governance work)."""
