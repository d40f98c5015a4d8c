"""A backtest's review: a reviewer's verdict bound to what it replayed, and the proposal's discussion."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction

from authority import access
from authority.audit import audit_record
from selection.models import Project, Task

from ..errors import CommentRefused, RegressionsUnacknowledged, ReviewRefused
from ..lifecycle import backtest_changed
from ..models import (
    Approval,
    ApprovalVerdict,
    Backtest,
    ReviewComment,
)
from . import card as review_card
from . import selectors

logger = logging.getLogger(__name__)

# --- reviews -------------------------------------------------------------------------------------


def backtest_review(
    *, backtest: Backtest, reviewer, verdict: str, comment: str = "", acknowledged: Iterable[str] = ()
) -> Approval:
    """A reviewer's verdict, bound to this exact backtest: candidate version, task set, engine.

    Four eyes: the proposal's author never reviews it, each reviewer gives one verdict, and the
    project's approval policy (its current frame's `approval` key) says when the tally is enough.
    The gates compare means, so one task can fall while they pass: an approval names each task the
    backtest made worse (review_card.regressed_tasks) in `acknowledged`, or it is refused with
    RegressionsUnacknowledged listing the rest. A rejection needs no acknowledgement.
    """
    acknowledged = [str(a) for a in acknowledged or ()]
    project = backtest.proposal.project
    access.access_review(reviewer, project)
    if verdict not in ApprovalVerdict.values:
        raise ReviewRefused(f'verdict "{verdict}" is not one of: {", ".join(ApprovalVerdict.values)}')
    comment = (comment or "").strip()
    if verdict == ApprovalVerdict.REJECT and not comment:
        raise ReviewRefused("a rejection needs a comment saying why")
    with transaction.atomic():
        Project.objects.select_for_update().get(pk=project.pk)
        backtest = Backtest.objects.select_related("proposal", "proposal__project").get(pk=backtest.pk)
        blockers = selectors.review_blockers(backtest=backtest, reviewer=reviewer)
        decision = selectors.backtest_decision(backtest)
        if not blockers and verdict == ApprovalVerdict.APPROVE and not decision.passed:
            blockers = [f"backtest #{backtest.pk} failed its gates: it can be rejected, not approved"]
        if blockers:
            raise ReviewRefused("; ".join(blockers))
        regressed = review_card.regressed_tasks(backtest=backtest) if verdict == ApprovalVerdict.APPROVE else []
        missing = review_card.missing_acknowledgements(regressed, acknowledged)
        if missing:
            raise RegressionsUnacknowledged(missing)
        approval = Approval.objects.create(
            backtest=backtest,
            frame_version_id=backtest.candidate_version_id,
            task_set_digest=backtest.task_set_digest,
            engine_version=backtest.engine_version,
            reviewer=reviewer,
            verdict=verdict,
            comment=comment,
        )
        proposal = backtest.proposal
        backtest_changed.send(sender=Backtest, backtest=backtest)
        audit_record(
            actor=reviewer,
            project=project,
            action=f"backtest.{'approved' if verdict == ApprovalVerdict.APPROVE else 'rejected'}",
            obj=approval,
            summary=f"{verdict} backtest #{backtest.pk} of proposal #{proposal.pk}",
            payload={
                "proposal": proposal.pk,
                "backtest": backtest.pk,
                "frame_version": backtest.candidate_version.number,
                "task_set_digest": backtest.task_set_digest,
                "engine_version": backtest.engine_version,
                "comment": comment,
                # the regressed tasks this approval looked at, in the backtest's task order
                "acknowledged": [r.task for r in regressed],
                "tally": selectors.review_tally(backtest).summary,
            },
        )
    return approval


MAX_COMMENT_CHARS = 20_000


def review_comment(
    *, proposal, author, body: str, backtest: Backtest | None = None, task_id: int | None = None
) -> ReviewComment:
    """One message in a proposal's review discussion, on the proposal or on one task row of one of
    its backtests; append-only (trigger) and audited. Leads and reviewers may comment."""
    project = proposal.project
    access.access_comment(author, project)
    body = (body or "").strip()
    if not body:
        raise CommentRefused("a comment needs some text", field=("body",))
    if len(body) > MAX_COMMENT_CHARS:
        raise CommentRefused(
            f"a comment holds at most {MAX_COMMENT_CHARS} characters ({len(body)} given)", field=("body",)
        )
    if task_id is not None and backtest is None:
        raise CommentRefused("a comment on a task names the backtest whose row it is", field=("backtest",))
    if backtest is not None and backtest.proposal_id != proposal.pk:
        raise CommentRefused(
            f"backtest #{backtest.pk} is not a backtest of proposal #{proposal.pk}", field=("backtest",)
        )
    task_uid = None
    if task_id is not None:
        if task_id not in backtest.task_ids:
            raise CommentRefused(f"task {task_id} is not in backtest #{backtest.pk}", field=("task",))
        task_uid = Task.objects.values_list("uid", flat=True).get(pk=task_id)
    with transaction.atomic():
        comment = ReviewComment.objects.create(
            proposal=proposal, backtest=backtest, task_id=task_id, author=author, body=body
        )
        where = f" on task {task_uid} of backtest #{backtest.pk}" if task_uid else ""
        audit_record(
            actor=author,
            project=project,
            action="proposal.commented",
            obj=comment,
            summary=f"comment on proposal #{proposal.pk}{where}",
            payload={
                "proposal": proposal.pk,
                "backtest": backtest.pk if backtest else None,
                "task": task_uid,
                "body": body,
            },
        )
    return comment
