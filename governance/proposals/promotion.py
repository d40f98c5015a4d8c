"""Promotion and rollback: a proposal's frame version put in force (the lead role, no blocker, one
transaction with its audit row), or an earlier version proposed again."""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction

from authority import access
from authority.audit import audit_record
from authority.models import FrameVersion, Promotion
from authority.selectors import current_frame_version
from authority.services import promotion_create
from rules import frame_patch as frames
from rules.frame_patch import FrameIssue
from selection.models import Project

from ..models import Proposal, ProposalKind
from . import selectors
from .errors import PromotionConflict, PromotionRefused, ProposalInvalid
from .services import proposal_submit, proposal_sync_state

logger = logging.getLogger(__name__)


PROMOTION_SEQUENCE_CONSTRAINT = "promotion_sequence_unique"


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
            blockers = selectors.promotion_blockers(proposal=proposal) + selectors.promoter_blockers(
                proposal=proposal, lead=lead
            )
            if blockers:
                raise PromotionRefused(blockers)
            previous = current_frame_version(project=project)
            promotion = promotion_create(
                project=project, frame_version=proposal.frame_version, promoted_by=lead
            )
            proposal_sync_state(proposal=proposal)
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
            _mark_others_stale(proposal=proposal, lead=lead)
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


def _mark_others_stale(*, proposal: Proposal, lead) -> None:
    """Every other open proposal of the project is stale once `proposal` lands: each gets an audit
    row with the reason (the keys the promoted version changed under it), which its page repeats."""
    current = selectors.current_with_proposal(project=proposal.project)
    for other in selectors.open_proposals(project=proposal.project):
        reason = selectors.stale_reason(other, current=current)
        if reason is None:
            continue
        audit_record(
            actor=lead,
            project=proposal.project,
            action="proposal.stale",
            obj=other,
            summary=f"proposal #{other.pk} is stale: {reason}",
            payload={"proposal": other.pk, "promoted": proposal.pk, "reason": reason},
        )


def proposal_rollback(
    *, project: Project, author, to_version: FrameVersion, rationale: str = "", start_backtest: bool = True
) -> Proposal:
    """Roll back to an earlier version in one action: a proposal whose patch takes the current
    version to `to_version`'s frame, backtested and reviewed like any other before it can land."""
    access.access_propose(author, project, action="roll back the frame")
    if to_version.project_id != project.pk:
        raise ProposalInvalid([FrameIssue(("version",), f"v{to_version.number} is not a version of {project.slug}")])
    current = current_frame_version(project=project)
    if current is None:
        raise ProposalInvalid([FrameIssue((), f"{project.slug} has no promoted frame version to roll back")])
    if current.pk == to_version.pk:
        raise ProposalInvalid([FrameIssue(("version",), f"v{to_version.number} is the current version already")])
    patch = frames.compute_patch(current.snapshot, to_version.snapshot)
    return proposal_submit(
        project=project,
        author=author,
        title=f"Roll back to v{to_version.number}",
        rationale=(rationale or "").strip()
        or f"Restores the frame of v{to_version.number} (v{current.number} is current).",
        patch=patch,
        expected_base=current,
        kind=ProposalKind.ROLLBACK,
        restores=to_version,
        start_backtest=start_backtest,
    )
