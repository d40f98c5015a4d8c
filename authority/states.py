"""The states a proposal goes through: governance stores them, a backtest refuses a final one."""

from __future__ import annotations

from django.db import models


class ProposalState(models.TextChoices):
    PROPOSED = "proposed"
    BACKTESTING = "backtesting"
    PASSED = "passed"
    FAILED = "failed"
    APPROVED = "approved"
    REJECTED = "rejected"
    PROMOTED = "promoted"
    CLOSED = "closed"


# a proposal no longer moves on once it is promoted or closed (a rebase closes the one it replaces)
FINAL_STATES = (ProposalState.PROMOTED, ProposalState.CLOSED)
