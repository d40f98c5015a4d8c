"""A proposal: its services, selectors, pages and API routes, its backtests read from the backtest app."""
