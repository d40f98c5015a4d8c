"""A proposal's review discussion as one thread: decisions, comments, steps, who and when, in time
order, in a fixed number of queries."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from authority.models import Promotion
from backtest.models import ApprovalVerdict, BacktestStatus, ReplaySide, ReviewComment, TaskReplay
from backtest.review.selectors import backtest_decision, backtest_reviews, proposal_backtests

from ..models import Proposal, ProposalClosure, ProposalKind


@dataclass(frozen=True)
class TimelineEvent:
    """One entry of a proposal's thread: a decision, a comment or a step, with who and when."""

    at: object  # datetime
    kind: str  # submitted | backtest | approve | reject | comment | closed | promoted
    who: str
    text: str
    body: str = ""
    task: str = ""  # the task row a comment is on
    links: tuple[tuple[str, str], ...] = ()  # (label, url)
    void: bool = False  # a verdict on a backtest a newer one replaced


def _task_links(backtest_id: int, task_id: int, replays: dict) -> tuple[tuple[str, str], ...]:
    base, cand = replays.get((backtest_id, task_id, ReplaySide.BASELINE)), replays.get(
        (backtest_id, task_id, ReplaySide.CANDIDATE)
    )
    links = [("backtest row", reverse("backtest-detail", args=[backtest_id]) + f"#task-{task_id}")]
    if base and cand:
        links.append(("trace diff", reverse("trace-diff") + f"?a={base}&b={cand}"))
    return tuple(links)


def _proposal_link(proposal_id: int | None) -> tuple[tuple[str, str], ...]:
    return ((f"proposal #{proposal_id}", reverse("proposal-detail", args=[proposal_id])),) if proposal_id else ()


def proposal_timeline(*, proposal: Proposal) -> list[TimelineEvent]:
    """Everything that happened to a proposal, oldest first, as a pull request's page shows it:
    its submission, each backtest and its verdicts, the comments (on it or on a task row, with the
    task's trace diff one link away), its closure or promotion. A fixed number of queries."""
    events: list[TimelineEvent] = []
    origin = ""
    if proposal.kind == ProposalKind.REBASE and proposal.supersedes_id:
        origin = f", rebasing proposal #{proposal.supersedes_id}"
    elif proposal.kind == ProposalKind.ROLLBACK and proposal.restores_id:
        origin = f", restoring v{proposal.restores.number}"
    elif proposal.supersedes_id:
        origin = f", replacing proposal #{proposal.supersedes_id}"
    events.append(
        TimelineEvent(
            proposal.created_at,
            "submitted",
            proposal.author.username if proposal.author else "import",
            f"proposed v{proposal.base_version.number} → v{proposal.frame_version.number}{origin}",
            links=_proposal_link(proposal.supersedes_id),
        )
    )
    backtests = proposal_backtests(proposal=proposal)
    latest_id = backtests[0].pk if backtests else None
    for backtest in backtests:
        url = reverse("backtest-detail", args=[backtest.pk])
        who = backtest.requested_by.username if backtest.requested_by else "system"
        events.append(
            TimelineEvent(
                backtest.created_at, "backtest", who,
                f"started backtest #{backtest.pk} (v{backtest.candidate_version.number} against "
                f"v{backtest.baseline_version.number})",
                links=((f"backtest #{backtest.pk}", url),),
            )
        )
        if backtest.finished_at:
            decision = backtest_decision(backtest)
            outcome = (
                f"ended in error: {backtest.error}" if backtest.status == BacktestStatus.ERROR
                else ("passed its gates" if decision and decision.passed else "failed its gates")
            )
            events.append(
                TimelineEvent(backtest.finished_at, "backtest", "system", f"backtest #{backtest.pk} {outcome}",
                              links=((f"backtest #{backtest.pk}", url),))
            )
        for review in backtest_reviews(backtest):
            events.append(
                TimelineEvent(
                    review.decided_at, review.verdict, review.reviewer.username,
                    f"{'approved' if review.verdict == ApprovalVerdict.APPROVE else 'rejected'} "
                    f"backtest #{backtest.pk}",
                    body=review.comment,
                    void=backtest.pk != latest_id,
                )
            )
    comments = list(
        ReviewComment.objects.filter(proposal=proposal).select_related("author", "task").order_by("created_at", "id")
    )
    replays = {}
    if any(c.task_id for c in comments):
        replays = {
            (b, t, side): trace
            for b, t, side, trace in TaskReplay.objects.filter(
                backtest__proposal=proposal, task_id__in=[c.task_id for c in comments if c.task_id]
            ).values_list("backtest_id", "task_id", "side", "trace_id")
        }
    for comment in comments:
        on = f" on task {comment.task.uid} of backtest #{comment.backtest_id}" if comment.task_id else ""
        events.append(
            TimelineEvent(
                comment.created_at, "comment", comment.author.username, f"commented{on}",
                body=comment.body,
                task=comment.task.uid if comment.task_id else "",
                links=_task_links(comment.backtest_id, comment.task_id, replays) if comment.task_id else (),
            )
        )
    closure = ProposalClosure.objects.filter(proposal=proposal).select_related("closed_by").first()
    if closure is not None:
        events.append(
            TimelineEvent(
                closure.closed_at, "closed", closure.closed_by.username if closure.closed_by else "system",
                "closed the proposal", body=closure.reason,
                links=_proposal_link(closure.superseded_by_id),
            )
        )
    for promotion in Promotion.objects.filter(frame_version_id=proposal.frame_version_id).select_related("promoted_by"):
        events.append(
            TimelineEvent(
                promotion.promoted_at, "promoted",
                promotion.promoted_by.username if promotion.promoted_by else "system",
                f"promoted v{proposal.frame_version.number} (promotion #{promotion.sequence})",
            )
        )
    return sorted(events, key=lambda e: e.at)


