"""What governance needs to know of a proposal's backtests, supplied by the app above it.

governance sits below backtest in the layers and never imports it. The backtest app registers
an EvidenceSource at start-up (BacktestConfig.ready); governance asks it for the state a
proposal's latest backtest and review imply and for what still blocks its promotion. With no
source registered a proposal has no evidence: it stays proposed and cannot be promoted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from django.db.models import CharField, QuerySet, Value


@dataclass(frozen=True)
class Evidence:
    """The latest backtest's verdict on one proposal, in governance's words."""

    state: str  # a ProposalState other than PROMOTED: proposed, backtesting, passed, failed, ...
    blockers: tuple[str, ...] = field(default=())  # why promotion must wait; empty when it may
    approvers: frozenset[int] = field(default=frozenset())  # users who approved the latest backtest


class EvidenceSource(Protocol):
    def evidence(self, proposal) -> Evidence: ...

    def with_latest_status(self, proposals: QuerySet) -> QuerySet:
        """`proposals` annotated with `latest_backtest_status` (None without a backtest)."""


class _NoEvidence:
    def evidence(self, proposal) -> Evidence:
        return Evidence(state="proposed", blockers=("no backtest has run for it yet",))

    def with_latest_status(self, proposals: QuerySet) -> QuerySet:
        return proposals.annotate(latest_backtest_status=Value(None, output_field=CharField()))


_source: EvidenceSource = _NoEvidence()


def register_evidence_source(source: EvidenceSource) -> None:
    """Called once at start-up by the app that runs backtests."""
    global _source
    _source = source


def evidence_for(proposal) -> Evidence:
    return _source.evidence(proposal)


def with_latest_backtest_status(proposals: QuerySet) -> QuerySet:
    return _source.with_latest_status(proposals)
