"""Reads of a proposal's backtests and their reviews: the latest run, its decision, the tally, what blocks a review."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.core.exceptions import ObjectDoesNotExist

from authority.selectors import current_frame_version
from authority.states import ProposalState
from selection.corpus.frames import ApprovalPolicy, approval_policy
from selection.engine.pipeline import ENGINE_VERSION
from selection.evaluation.task_sets import task_set_digest
from selection.models import Project

from ..models import (
    Approval,
    ApprovalVerdict,
    Backtest,
    BacktestDecision,
    BacktestStatus,
    ReviewComment,
)


def proposal_backtests(*, proposal) -> list[Backtest]:
    """Newest first, with decision, reviews and reviewers joined (two queries)."""
    return list(
        Backtest.objects.filter(proposal=proposal)
        .select_related("decision", "requested_by", "candidate_version", "baseline_version", "task_set_version")
        .prefetch_related("approvals__reviewer")
        .order_by("-created_at", "-id")
    )


def latest_backtest(*, proposal) -> Backtest | None:
    return (
        Backtest.objects.filter(proposal=proposal)
        .select_related("decision", "candidate_version", "baseline_version")
        .prefetch_related("approvals__reviewer")
        .order_by("-created_at", "-id")
        .first()
    )


def _related(obj, name: str):
    try:
        return getattr(obj, name)
    except ObjectDoesNotExist:
        return None


def backtest_decision(backtest: Backtest) -> BacktestDecision | None:
    return _related(backtest, "decision")


def backtest_reviews(backtest: Backtest) -> list[Approval]:
    """Every verdict on this backtest, oldest first (uses a prefetch when there is one)."""
    return sorted(backtest.approvals.all(), key=lambda a: (a.decided_at, a.pk))


def project_approval_policy(*, project: Project) -> ApprovalPolicy:
    """The policy of the project's current frame: a proposal cannot lower its own bar."""
    current = current_frame_version(project=project)
    return approval_policy(current.snapshot if current else None)


@dataclass(frozen=True)
class ReviewTally:
    """Where a backtest's reviews stand against the project's approval policy (four eyes)."""

    policy: ApprovalPolicy
    approvals: tuple[Approval, ...]
    rejections: tuple[Approval, ...]

    @property
    def approvers(self) -> frozenset[int]:
        return frozenset(a.reviewer_id for a in self.approvals)

    @property
    def blocked(self) -> bool:
        return bool(self.rejections) and self.policy.rejection_blocks

    @property
    def satisfied(self) -> bool:
        return not self.blocked and len(self.approvals) >= self.policy.required_approvals

    @property
    def closed(self) -> bool:
        """No further verdict can change the outcome."""
        return self.satisfied or self.blocked

    @property
    def summary(self) -> str:
        text = f"{len(self.approvals)} of {self.policy.required_approvals} approvals"
        if self.rejections:
            text += f", {len(self.rejections)} rejection{'s' if len(self.rejections) > 1 else ''}"
            text += " (blocks promotion)" if self.policy.rejection_blocks else ""
        return text


def review_tally(backtest: Backtest, *, policy: ApprovalPolicy | None = None) -> ReviewTally:
    reviews = backtest_reviews(backtest)
    return ReviewTally(
        policy=policy or project_approval_policy(project=backtest.proposal.project),
        approvals=tuple(a for a in reviews if a.verdict == ApprovalVerdict.APPROVE),
        rejections=tuple(a for a in reviews if a.verdict == ApprovalVerdict.REJECT),
    )


def current_engine_version() -> str:
    """The engine version replays run under now; an approval is bound to the one it saw."""
    return str(ENGINE_VERSION)


def current_task_set_digest(*, project: Project) -> str:
    """The digest of the project's task set now (selection.evaluation.task_sets)."""
    return task_set_digest(project=project)


def review_blockers(*, backtest: Backtest, reviewer=None) -> list[str]:
    """Why `backtest` may not be reviewed now (by `reviewer`, when given); empty when it may."""
    if backtest.status != BacktestStatus.FINISHED:
        return [f"backtest #{backtest.pk} is {backtest.status}, not finished"]
    if backtest_decision(backtest) is None:
        return [f"backtest #{backtest.pk} has no decision yet"]
    if reviewer is not None and backtest.proposal.author_id == reviewer.pk:
        return [
            f"{reviewer.username} wrote proposal #{backtest.proposal_id}: "
            "its author cannot review its backtest"
        ]
    tally = review_tally(backtest)
    if reviewer is not None and any(a.reviewer_id == reviewer.pk for a in (*tally.approvals, *tally.rejections)):
        return [f"{reviewer.username} has already reviewed backtest #{backtest.pk}"]
    if tally.closed:
        return [f"backtest #{backtest.pk} is already reviewed ({tally.summary})"]
    if backtest.proposal.state == ProposalState.PROMOTED:
        return ["the proposal is already promoted"]
    if backtest.proposal.state == ProposalState.CLOSED:
        return ["the proposal is closed"]
    latest = latest_backtest(proposal=backtest.proposal)
    if latest is not None and latest.pk != backtest.pk:
        return [f"backtest #{backtest.pk} is not the proposal's latest (#{latest.pk} is)"]
    return []


def task_comments(*, backtest: Backtest) -> dict[int, list[ReviewComment]]:
    """task id -> the comments on that task's row of this backtest, oldest first (one query)."""
    found: dict[int, list[ReviewComment]] = defaultdict(list)
    for comment in ReviewComment.objects.filter(backtest=backtest, task__isnull=False).select_related("author"):
        found[comment.task_id].append(comment)
    return dict(found)
