"""Governance writes: proposals and promotions; each checks its role in authority.access and
audits in the same transaction.

The dashboard, the CLI and the API all call these functions, so they behave identically.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction

from authority import access
from authority.audit import audit_record
from authority.models import AuditEntry, FrameVersion, Promotion
from authority.selectors import current_frame_version
from authority.services import frame_version_create, promotion_create
from selection.corpus.frames import merge_patch
from selection.models import Project

from . import frames, selectors
from .frames import FrameIssue
from .models import Proposal, ProposalState
from .signals import proposal_submitted

logger = logging.getLogger(__name__)

PROMOTION_SEQUENCE_CONSTRAINT = "promotion_sequence_unique"


class GovernanceError(Exception):
    """A refused governance write; the message says why, in the user's words."""


class ProposalInvalid(GovernanceError):
    """The patch, or the frame it produces, breaks the frame format; `issues` name each field."""

    def __init__(self, issues: list[FrameIssue]):
        self.issues = list(issues)
        super().__init__("; ".join(str(issue) for issue in self.issues))


class PromotionRefused(GovernanceError):
    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("cannot promote: " + "; ".join(self.reasons))


class PromotionConflict(PromotionRefused):
    """Another promotion of the same project committed first; nothing was written."""


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
    on the proposal. The `proposal_submitted` signal is sent in the same transaction (the backtest
    app starts the proposal's backtest when it commits).
    `expected_base`: the version the author edited; refused if another was promoted since.
    """
    access.access_propose(author, project)
    title = (title or "").strip()
    if not title:
        raise ProposalInvalid([FrameIssue(("title",), "a proposal needs a title")])
    with transaction.atomic():
        # one writer per project at a time: version numbers and the base cannot move under us
        Project.objects.select_for_update().get(pk=project.pk)
        base = current_frame_version(project=project)
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
        if not issues:
            issues = _scope_issues(author, base.snapshot, frame, project)
        if issues:
            raise ProposalInvalid(issues)
        scope = list(frame.get("scope") or [project.slug])
        warnings = frames.unknown_class_warnings(
            frame, carried=selectors.carried_classes(scope=scope), scope=scope
        )
        proposal = _proposal_create(
            project=project, base=base, frame=frame, patch=patch, title=title, rationale=rationale,
            warnings=warnings, uid=uid, author=author,
        )
        number = proposal.frame_version.number
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
        proposal_submitted.send(sender=Proposal, proposal=proposal, requested_by=author)
    return proposal


def _proposal_create(
    *, project: Project, base: FrameVersion, frame: dict, patch: Any, title: str, rationale: str,
    warnings: list[str], uid: str, author,
) -> Proposal:
    """The proposal row and the immutable version it proposes; the caller audits."""
    version = frame_version_create(project=project, snapshot=frame, parent=base, author=author)
    return Proposal.objects.create(
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


def _scope_issues(author, base: dict, frame: dict, project: Project) -> list[FrameIssue]:
    """A lead may widen the scope only to projects they hold a role in: whoever widens a scope
    lets this project's agent see the other project's units, which its own people must allow."""
    before = set(base.get("scope") or [project.slug])
    added = [(i, s) for i, s in enumerate(frame.get("scope") or [project.slug]) if s not in before]
    if not added:
        return []
    readable = set(
        access.readable_projects(author, Project.objects.filter(slug__in=[s for _i, s in added]))
        .values_list("slug", flat=True)
    )
    return [
        FrameIssue(
            ("scope", index),
            f'{author.username} holds no role in project "{slug}": only someone who does may '
            "widen the scope to it",
        )
        for index, slug in added
        if slug not in readable
    ]


def proposal_sync_state(*, proposal: Proposal) -> Proposal:
    """Set Proposal.state from the append-only rows (promotions; the latest backtest and its
    review, as governance.evidence reports them). The only code that changes Proposal.state:
    every write that moves a proposal on (a backtest starting or finishing, a review, a
    promotion) calls it inside its own transaction.
    """
    state = selectors.derived_proposal_state(proposal=proposal)
    if proposal.state != state:
        proposal.state = state
        proposal.save(update_fields=["state"])
    return proposal


def proposal_split(*, proposal: Proposal, lead) -> list[Proposal]:
    """One new proposal per part of `proposal`'s patch (frames.patch_parts: a work type's list, the
    scope, the class pull, ...), each submitted as proposal_submit submits it, so each gets its
    own backtest when the split commits. The original stays as it is; the split is audited on it.

    Needs the lead role. Refused (nothing written) for a promoted proposal, a patch of one part,
    a proposal already split, or a part that no longer applies over the current frame.
    """
    project = proposal.project
    access.access_propose(lead, project)
    parts = frames.patch_parts(proposal.patch)
    if len(parts) < 2:
        raise ProposalInvalid(
            [FrameIssue((), f"proposal #{proposal.pk} changes one part ({', '.join(parts) or 'none'}): "
                        "there is nothing to split")]
        )
    with transaction.atomic():
        Project.objects.select_for_update().get(pk=project.pk)
        proposal = Proposal.objects.select_related("project").get(pk=proposal.pk)
        if proposal.state == ProposalState.PROMOTED:
            raise ProposalInvalid([FrameIssue((), f"proposal #{proposal.pk} is promoted: it cannot be split")])
        if AuditEntry.objects.filter(
            project=project, action="proposal.split", object_type="proposal", object_id=str(proposal.pk)
        ).exists():
            raise ProposalInvalid([FrameIssue((), f"proposal #{proposal.pk} is split already")])
        created = []
        for part in parts:
            try:
                created.append(
                    proposal_submit(
                        project=project,
                        author=lead,
                        title=f"{proposal.title} — {part}"[:300],
                        rationale=(
                            f"Split from proposal #{proposal.pk} ({proposal.title}): its part {part} alone."
                            + (f"\n\n{proposal.rationale}" if proposal.rationale else "")
                        ),
                        patch=frames.patch_only(proposal.patch, [part]),
                        uid=f"{proposal.uid}:{part}"[:200] if proposal.uid else "",
                    )
                )
            except ProposalInvalid as error:
                raise ProposalInvalid(
                    [FrameIssue(issue.path, f"part {part}: {issue.message}") for issue in error.issues]
                ) from error
        audit_record(
            actor=lead,
            project=project,
            action="proposal.split",
            obj=proposal,
            summary=(
                f"proposal #{proposal.pk} split into "
                + ", ".join(f"#{p.pk} ({part})" for p, part in zip(created, parts, strict=True))
            ),
            payload={"parts": parts, "proposals": [p.pk for p in created]},
        )
    return created


# --- promotion -----------------------------------------------------------------------------------


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


# --- proposals that arrive with a corpus ---------------------------------------------------------


def proposal_import(
    *, project: Project, base: FrameVersion, spec, carried: dict[str, set[str]], actor=None
) -> Proposal:
    """A proposal from proposals.yaml: its patch over the imported frame (v1) as a new version.

    Called by the corpus import inside its transaction (see governance.corpus); the import
    itself was authorised by whoever ran it, so no role is checked here. `carried`: project slug
    -> the evidence classes its units carry (a class no unit in scope carries is a warning).
    """
    frame = merge_patch(base.snapshot, spec.patch)
    scope = list(frame.get("scope") or [project.slug])
    in_scope = set().union(*(carried.get(slug, set()) for slug in scope))
    proposal = _proposal_create(
        project=project, base=base, frame=frame, patch=spec.patch, title=spec.title,
        rationale=spec.rationale, warnings=frames.unknown_class_warnings(frame, carried=in_scope, scope=scope),
        uid=spec.id, author=None,
    )
    version = proposal.frame_version
    audit_record(
        actor=actor,
        project=project,
        action="proposal.imported",
        obj=proposal,
        summary=f"{spec.title or spec.id} (v{base.number} → v{version.number}), from proposals.yaml",
        payload={
            "uid": spec.id, "base_version": base.number, "frame_version": version.number, "patch": spec.patch,
        },
    )
    return proposal
