"""What a proposal's backtests say of it: the state its latest backtest and review imply, and what
still blocks its promotion, read from the backtest app's selectors."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import OuterRef, QuerySet, Subquery

from authority.selectors import current_frame_version
from backtest.models import Backtest, BacktestStatus
from backtest.review import selectors as review_selectors

from ..models import Proposal, ProposalState


@dataclass(frozen=True)
class Evidence:
    """The latest backtest's verdict on one proposal."""

    state: str  # a ProposalState other than PROMOTED: proposed, backtesting, passed, failed, ...
    blockers: tuple[str, ...] = field(default=())  # why promotion must wait; empty when it may
    approvers: frozenset[int] = field(default=frozenset())  # users who approved the latest backtest


def _evidence_state(backtest: Backtest | None) -> str:
    if backtest is None or backtest.status == BacktestStatus.ERROR:
        # an errored run judged nothing: the proposal waits for another backtest
        return ProposalState.PROPOSED
    if backtest.status != BacktestStatus.FINISHED:
        return ProposalState.BACKTESTING
    decision = review_selectors.backtest_decision(backtest)
    if decision is None:
        return ProposalState.BACKTESTING
    tally = review_selectors.review_tally(backtest)
    if tally.blocked:
        return ProposalState.REJECTED
    if tally.satisfied:
        return ProposalState.APPROVED
    return ProposalState.PASSED if decision.passed else ProposalState.FAILED


def _promotion_blockers(proposal: Proposal, backtest: Backtest | None) -> list[str]:
    """What the proposal's LATEST backtest still lacks for a promotion: to have passed and to
    carry an approving review still bound to what runs now (the same candidate frame version,
    the same task set, the current engine version)."""
    if backtest is None:
        return ["no backtest has run for it yet"]
    blockers: list[str] = []
    label = f"the latest backtest (#{backtest.pk})"
    if backtest.status != BacktestStatus.FINISHED:
        return [f"{label} is {backtest.status}, not finished"]
    decision = review_selectors.backtest_decision(backtest)
    if decision is None:
        return [f"{label} has no decision"]
    if not decision.passed:
        blockers.append(f"{label} failed its gates")
    if backtest.candidate_version_id != proposal.frame_version_id:
        blockers.append(f"{label} replayed v{backtest.candidate_version.number}, not this proposal's version")
    current = current_frame_version(project=proposal.project)
    if current is not None and backtest.baseline_version_id != current.id:
        blockers.append(
            f"{label} compared against v{backtest.baseline_version.number}, but v{current.number} is current"
        )
    tally = review_selectors.review_tally(backtest)
    if tally.blocked:
        return blockers + [f"a reviewer rejected {label}"]
    if not tally.approvals:
        return blockers + [f"{label} has not been reviewed"]
    if not tally.satisfied:
        blockers.append(
            f"{label} has {tally.summary}: the project's policy needs "
            f"{tally.policy.required_approvals} distinct approvals"
        )
    engine = review_selectors.current_engine_version()
    for approval in tally.approvals:
        who = approval.reviewer.username
        if approval.frame_version_id != proposal.frame_version_id:
            blockers.append(f"{who}'s approval is bound to another frame version")
        if approval.task_set_digest != backtest.task_set_digest:
            blockers.append(f"{who}'s approval is bound to another task set than the backtest replayed")
        if approval.engine_version != engine:
            blockers.append(
                f"{who} approved under engine {approval.engine_version}, but the engine is {engine} now: "
                "run a new backtest"
            )
    if review_selectors.current_task_set_digest(project=proposal.project) != backtest.task_set_digest:
        blockers.append("the project's task set changed since the approved backtest: run a new backtest")
    return blockers


def evidence_for(proposal: Proposal) -> Evidence:
    backtest = review_selectors.latest_backtest(proposal=proposal)
    approvers = review_selectors.review_tally(backtest).approvers if backtest is not None else frozenset()
    return Evidence(
        state=_evidence_state(backtest),
        blockers=tuple(_promotion_blockers(proposal, backtest)),
        approvers=approvers,
    )


def with_latest_backtest_status(proposals: QuerySet) -> QuerySet:
    """`proposals` annotated with `latest_backtest_status` (None without a backtest)."""
    latest = Backtest.objects.filter(proposal=OuterRef("pk")).order_by("-created_at", "-id")
    return proposals.annotate(latest_backtest_status=Subquery(latest.values("status")[:1]))
