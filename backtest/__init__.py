"""Backtests: replaying every task of a project under a proposal against declared gates."""
