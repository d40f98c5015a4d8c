"""The emergency revert: a lead restores a version that was in force at once, with a reason and a
second person's confirmation, and the backtest follows instead of leading.

Two steps, two people. A lead asks (revert_request): a rollback proposal is written (its backtest
waits for the restore) and the request, with its reason, is audited on it; asked on an open
rollback proposal, that one is used, whatever its backtest says. Another lead or a reviewer of
the project confirms (revert_confirm): the restored version is promoted in the same transaction
as its audit row, and its backtest starts on commit, against the version it replaced; its verdict
shows on the proposal. The audit trail is the request's only record:
the request is the `proposal.revert_requested` row, the confirmation the `proposal.reverted` row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction

from authority import access
from authority.access import AccessDenied
from authority.audit import audit_record
from authority.models import AuditEntry, FrameVersion, Promotion
from authority.selectors import current_frame_version
from authority.services import promotion_create
from backtest.services import backtest_enqueue
from rules.frame_patch import FrameIssue
from selection.models import Project

from ..models import FINAL_STATES, Proposal, ProposalKind
from .errors import PromotionConflict, PromotionRefused, ProposalInvalid
from .promotion import PROMOTION_SEQUENCE_CONSTRAINT, _mark_others_stale, proposal_rollback
from .services import proposal_sync_state

REQUESTED = "proposal.revert_requested"
REVERTED = "proposal.reverted"


@dataclass(frozen=True)
class RevertRequest:
    """An emergency revert asked for on a rollback proposal, and its confirmation once given."""

    requested_by: str
    requested_by_id: int | None
    reason: str
    at: datetime
    confirmed_by: str = ""
    confirmed_at: datetime | None = None

    @property
    def confirmed(self) -> bool:
        return self.confirmed_at is not None


def _rows(proposal: Proposal, action: str):
    return AuditEntry.objects.filter(
        project_id=proposal.project_id, action=action, object_type="proposal", object_id=str(proposal.pk)
    ).order_by("at", "id")


def revert_request_of(proposal: Proposal) -> RevertRequest | None:
    """The emergency revert asked for on this proposal, if any (two queries)."""
    if proposal.kind != ProposalKind.ROLLBACK:
        return None
    asked = _rows(proposal, REQUESTED).first()
    if asked is None:
        return None
    done = _rows(proposal, REVERTED).first()
    return RevertRequest(
        requested_by=asked.actor_label,
        requested_by_id=asked.actor_id,
        reason=asked.payload.get("reason", ""),
        at=asked.at,
        confirmed_by=done.actor_label if done else "",
        confirmed_at=done.at if done else None,
    )


def revertable(proposal: Proposal) -> bool:
    """An open rollback to a version that was in force: one a lead may restore at once."""
    return (
        proposal.kind == ProposalKind.ROLLBACK
        and proposal.state not in FINAL_STATES
        and Promotion.objects.filter(frame_version_id=proposal.restores_id).exists()
    )


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ProposalInvalid([FrameIssue(("reason",), "an emergency revert needs a reason (kept in the audit log)")])
    return reason


def revert_request(
    *,
    lead,
    proposal: Proposal | None = None,
    project: Project | None = None,
    to_version: FrameVersion | None = None,
    reason: str,
) -> Proposal:
    """A lead asks to restore a version that was promoted, at once: on an open rollback proposal,
    or (project, to_version) writing that rollback proposal first. Audited on the proposal."""
    project = proposal.project if proposal is not None else project
    access.access_promote(lead, project)
    reason = _reason(reason)
    with transaction.atomic():
        if proposal is None:
            if not Promotion.objects.filter(frame_version=to_version).exists():
                raise ProposalInvalid(
                    [
                        FrameIssue(
                            ("version",),
                            f"v{to_version.number} was never in force: only a version that "
                            "was promoted can be restored at once",
                        )
                    ]
                )
            proposal = proposal_rollback(
                project=project, author=lead, to_version=to_version, rationale=reason, start_backtest=False
            )
        proposal = Proposal.objects.select_related("project", "restores").get(pk=proposal.pk)
        if proposal.kind != ProposalKind.ROLLBACK or proposal.state in FINAL_STATES:
            raise ProposalInvalid([FrameIssue((), f"proposal #{proposal.pk} is not an open rollback")])
        if not Promotion.objects.filter(frame_version_id=proposal.restores_id).exists():
            raise ProposalInvalid(
                [FrameIssue((), f"v{proposal.restores.number} was never in force: it cannot be restored at once")]
            )
        if revert_request_of(proposal) is not None:
            raise ProposalInvalid([FrameIssue((), f"a revert of proposal #{proposal.pk} is asked for already")])
        audit_record(
            actor=lead,
            project=project,
            action=REQUESTED,
            obj=proposal,
            summary=f"{lead.username} asks to restore v{proposal.restores.number} at once: {reason}",
            payload={"proposal": proposal.pk, "to_version": proposal.restores.number, "reason": reason},
        )
    return proposal


def _check_role(confirmer, project: Project) -> None:
    caps = access.access_read(confirmer, project)
    if not (caps.can_promote or caps.can_review):
        raise AccessDenied(
            f"{confirmer.username} may not confirm an emergency revert in {project.slug}: "
            "it needs the project lead or reviewer role"
        )


def _check_confirmer(confirmer, request: RevertRequest) -> None:
    if confirmer.pk == request.requested_by_id:
        raise PromotionRefused([f"{confirmer.username} asked for this revert: another lead or reviewer confirms it"])


def revert_confirm(*, proposal: Proposal, confirmer) -> Promotion:
    """The second person confirms: the restored version is current at once, the backtest follows."""
    project = proposal.project
    _check_role(confirmer, project)
    try:
        with transaction.atomic():
            Project.objects.select_for_update().get(pk=project.pk)
            proposal = Proposal.objects.select_related("project", "base_version", "frame_version", "restores").get(
                pk=proposal.pk
            )
            request = revert_request_of(proposal)
            if request is None:
                raise PromotionRefused([f"no emergency revert is asked for on proposal #{proposal.pk}"])
            _check_confirmer(confirmer, request)
            if request.confirmed or proposal.state in FINAL_STATES:
                raise PromotionRefused([f"proposal #{proposal.pk} is {proposal.state} already"])
            current = current_frame_version(project=project)
            if current is None or current.pk != proposal.base_version_id:
                raise PromotionRefused(
                    [
                        f"v{current.number if current else '-'} was promoted since the revert was asked for: "
                        "ask again over the current version"
                    ]
                )
            promotion = promotion_create(project=project, frame_version=proposal.frame_version, promoted_by=confirmer)
            proposal_sync_state(proposal=proposal)
            audit_record(
                actor=confirmer,
                project=project,
                action=REVERTED,
                obj=proposal,
                summary=(
                    f"v{proposal.restores.number} restored at once as v{proposal.frame_version.number} "
                    f"(was v{current.number}): asked by {request.requested_by}, confirmed by "
                    f"{confirmer.username}: {request.reason}"
                ),
                payload={
                    "proposal": proposal.pk,
                    "frame_version": proposal.frame_version.number,
                    "restores": proposal.restores.number,
                    "previous_version": current.number,
                    "requested_by": request.requested_by,
                    "reason": request.reason,
                    "sequence": promotion.sequence,
                },
            )
            _mark_others_stale(proposal=proposal, lead=confirmer)
            restored = proposal
            # the backtest follows the restore: the restored frame against the version it replaced
            transaction.on_commit(
                lambda: backtest_enqueue(proposal=restored, requested_by=None, after_promotion=True), robust=True
            )
    except IntegrityError as error:
        if PROMOTION_SEQUENCE_CONSTRAINT in str(error):
            raise PromotionConflict(["another promotion of this project won the race; reload and check"]) from error
        raise
    return promotion
