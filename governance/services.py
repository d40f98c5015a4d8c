"""Governance writes: each checks its role in access.py, and audits in the same transaction.

The dashboard, the CLI and the API all call these functions, so they behave identically.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from backtest.models import Approval, ApprovalVerdict, Backtest
from selection.models import Project

from . import access, frames, selectors
from .frames import FrameIssue
from .models import AuditEntry, FrameVersion, Promotion, Proposal, ProposalState

logger = logging.getLogger(__name__)

PROMOTION_SEQUENCE_CONSTRAINT = "promotion_sequence_unique"


class GovernanceError(Exception):
    """A refused governance write; the message says why, in the user's words."""


class ProposalInvalid(GovernanceError):
    """The patch, or the frame it produces, breaks the frame format; `issues` name each field."""

    def __init__(self, issues: list[FrameIssue]):
        self.issues = list(issues)
        super().__init__("; ".join(str(issue) for issue in self.issues))


class ReviewRefused(GovernanceError):
    pass


class PromotionRefused(GovernanceError):
    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("cannot promote: " + "; ".join(self.reasons))


class PromotionConflict(PromotionRefused):
    """Another promotion of the same project committed first; nothing was written."""


# --- audit ---------------------------------------------------------------------------------------


def audit_record(
    *,
    actor,
    project: Project | None,
    action: str,
    obj: Any,
    summary: str = "",
    payload: dict | None = None,
) -> AuditEntry:
    """Append one audit row; call it inside the transaction of the write it records."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError(
            "audit_record must run inside the transaction.atomic of the write it records"
        )
    return AuditEntry.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_label=getattr(actor, "username", None) or "system",
        project=project,
        action=action,
        object_type=type(obj)._meta.model_name,
        object_id=str(obj.pk),
        summary=summary,
        payload=payload or {},
    )


# --- proposals -----------------------------------------------------------------------------------


def proposal_submit(
    *,
    project: Project,
    author,
    title: str,
    rationale: str = "",
    patch: Any,
    expected_base: FrameVersion | None = None,
    uid: str = "",
) -> Proposal:
    """Store a JSON Merge Patch over the current promoted frame as a new immutable FrameVersion.

    Raises AccessDenied without the lead role, ProposalInvalid (issues naming each field) when the
    patch or the frame it produces is malformed. A class no unit in scope carries is a warning kept
    on the proposal. After commit, `backtest.services.backtest_enqueue` starts its backtest.
    `expected_base`: the version the author edited; refused if another was promoted since.
    """
    access.access_propose(author, project)
    title = (title or "").strip()
    if not title:
        raise ProposalInvalid([FrameIssue(("title",), "a proposal needs a title")])
    with transaction.atomic():
        # one writer per project at a time: version numbers and the base cannot move under us
        Project.objects.select_for_update().get(pk=project.pk)
        base = selectors.current_frame_version(project=project)
        if base is None:
            raise ProposalInvalid(
                [FrameIssue((), f"{project.slug} has no promoted frame version to patch")]
            )
        if expected_base is not None and expected_base.pk != base.pk:
            raise ProposalInvalid(
                [
                    FrameIssue(
                        (),
                        f"v{base.number} was promoted since you opened v{expected_base.number}: "
                        "review it and submit again",
                    )
                ]
            )
        frame, issues = frames.apply_patch(base.snapshot, patch)
        if not issues:
            issues = frames.frame_issues(
                frame, project=project.slug, declared=selectors.declared_projects(project=project)
            )
        if not issues and frame == base.snapshot:
            issues = [FrameIssue((), f"the patch changes nothing in v{base.number}")]
        if issues:
            raise ProposalInvalid(issues)
        scope = list(frame.get("scope") or [project.slug])
        warnings = frames.unknown_class_warnings(
            frame, carried=selectors.carried_classes(scope=scope), scope=scope
        )
        number = (
            FrameVersion.objects.filter(project=project).aggregate(n=Max("number"))["n"] or 0
        ) + 1
        version = FrameVersion.objects.create(
            project=project,
            number=number,
            snapshot=frame,
            parent=base,
            author=author,
            author_label=author.username,
            origin="proposal",
        )
        proposal = Proposal.objects.create(
            project=project,
            uid=uid,
            title=title,
            rationale=rationale or "",
            patch=patch,
            base_version=base,
            frame_version=version,
            warnings=warnings,
            author=author,
            state=ProposalState.PROPOSED,
        )
        audit_record(
            actor=author,
            project=project,
            action="proposal.submitted",
            obj=proposal,
            summary=f"{title} (v{base.number} → v{number})",
            payload={
                "base_version": base.number,
                "frame_version": number,
                "patch": patch,
                "warnings": warnings,
            },
        )
        # imported here: backtest.services builds on this module
        from backtest.services import backtest_enqueue

        # robust: the proposal is committed whatever the queue does; a failed enqueue is logged
        transaction.on_commit(lambda: backtest_enqueue(proposal=proposal, requested_by=author), robust=True)
    return proposal


def proposal_sync_state(*, proposal: Proposal) -> Proposal:
    """Set Proposal.state from the append-only rows (latest backtest, its review, promotions).

    The backtest app calls this inside its own transaction when a backtest starts or finishes.
    """
    state = selectors.derived_proposal_state(proposal=proposal)
    if proposal.state != state:
        proposal.state = state
        proposal.save(update_fields=["state"])
    return proposal


# --- reviews -------------------------------------------------------------------------------------


def backtest_review(*, backtest: Backtest, reviewer, verdict: str, comment: str = "") -> Approval:
    """A reviewer's verdict, bound to this exact backtest: candidate version, task set, engine.

    Four eyes: the proposal's author never reviews it, each reviewer gives one verdict, and the
    project's approval policy (its current frame's `approval` key) says when the tally is enough.
    """
    project = backtest.proposal.project
    access.access_review(reviewer, project)
    if verdict not in ApprovalVerdict.values:
        raise ReviewRefused(
            f'verdict "{verdict}" is not one of: {", ".join(ApprovalVerdict.values)}'
        )
    comment = (comment or "").strip()
    if verdict == ApprovalVerdict.REJECT and not comment:
        raise ReviewRefused("a rejection needs a comment saying why")
    with transaction.atomic():
        Project.objects.select_for_update().get(pk=project.pk)
        backtest = Backtest.objects.select_related("proposal", "proposal__project").get(
            pk=backtest.pk
        )
        blockers = selectors.review_blockers(backtest=backtest, reviewer=reviewer)
        decision = selectors.backtest_decision(backtest)
        if not blockers and verdict == ApprovalVerdict.APPROVE and not decision.passed:
            blockers = [
                f"backtest #{backtest.pk} failed its gates: it can be rejected, not approved"
            ]
        if blockers:
            raise ReviewRefused("; ".join(blockers))
        approval = Approval.objects.create(
            backtest=backtest,
            frame_version_id=backtest.candidate_version_id,
            task_set_digest=backtest.task_set_digest,
            engine_version=backtest.engine_version,
            reviewer=reviewer,
            verdict=verdict,
            comment=comment,
        )
        proposal = proposal_sync_state(proposal=backtest.proposal)
        tally = selectors.review_tally(backtest)
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
                "tally": tally.summary,
            },
        )
    return approval


# --- promotion -----------------------------------------------------------------------------------


def _next_sequence(project: Project) -> int:
    return (Promotion.objects.filter(project=project).aggregate(n=Max("sequence"))["n"] or 0) + 1


def proposal_promote(*, proposal: Proposal, lead) -> Promotion:
    """Make the proposal's frame version current: a new Promotion, sequence = previous + 1.

    Needs the lead role and no promotion blocker (selectors.promotion_blockers). The project row is
    locked so concurrent promotions queue; should two still collide, the unique constraint on
    (project, sequence) decides and the loser gets PromotionConflict with nothing written.
    """
    project = proposal.project
    access.access_promote(lead, project)
    try:
        with transaction.atomic():
            Project.objects.select_for_update().get(pk=project.pk)
            proposal = Proposal.objects.select_related(
                "project", "base_version", "frame_version"
            ).get(pk=proposal.pk)
            blockers = selectors.promotion_blockers(
                proposal=proposal
            ) + selectors.promoter_blockers(proposal=proposal, lead=lead)
            if blockers:
                raise PromotionRefused(blockers)
            previous = selectors.current_frame_version(project=project)
            promotion = Promotion.objects.create(
                project=project,
                frame_version=proposal.frame_version,
                sequence=_next_sequence(project),
                promoted_by=lead,
            )
            proposal.state = ProposalState.PROMOTED
            proposal.save(update_fields=["state"])
            audit_record(
                actor=lead,
                project=project,
                action="proposal.promoted",
                obj=promotion,
                summary=(
                    f"v{proposal.frame_version.number} promoted "
                    f"(was v{previous.number if previous else '-'}): {proposal.title}"
                ),
                payload={
                    "proposal": proposal.pk,
                    "frame_version": proposal.frame_version.number,
                    "previous_version": previous.number if previous else None,
                    "sequence": promotion.sequence,
                },
            )
    except IntegrityError as error:
        if PROMOTION_SEQUENCE_CONSTRAINT in str(error):
            raise PromotionConflict(
                [
                    "another promotion of this project won the race; "
                    "reload and check the current version"
                ]
            ) from error
        raise
    return promotion
