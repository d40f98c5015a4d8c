"""Evaluations: every task under every condition, scored against its ledger; task sets; the jobs that run them."""
