"""Proposal writes: submit, split, close, rebase, import; each checks its role in authority.access and
audits in the same transaction (promotion and rollback: promotion.py).

The dashboard, the CLI and the API all call these functions, so they behave identically.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from authority import access
from authority.audit import audit_record
from authority.errors import GovernanceError
from authority.models import AuditEntry, FrameVersion
from authority.selectors import current_frame_version
from authority.services import frame_version_create
from backtest.services import backtest_enqueue
from rules import frame_patch as frames
from rules.frame_patch import FrameIssue
from selection.corpus.frames import merge_patch
from selection.models import Project

from .. import selectors as governance_selectors
from ..models import FINAL_STATES, Proposal, ProposalClosure, ProposalKind, ProposalState
from . import selectors
from .errors import ProposalInvalid, RebaseConflict

logger = logging.getLogger(__name__)


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
    kind: str = ProposalKind.CHANGE,
    supersedes: Proposal | None = None,
    restores: FrameVersion | None = None,
    start_backtest: bool = True,
) -> Proposal:
    """Store a JSON Merge Patch over the current promoted frame as a new immutable FrameVersion.

    Raises AccessDenied without the lead role, ProposalInvalid (issues naming each field) when the
    patch or the frame it produces is malformed. A class no unit in scope carries is a warning kept
    on the proposal. Its backtest starts once the proposal commits (backtest_enqueue on commit).
    `expected_base`: the version the author edited; refused if another was promoted since.
    `supersedes`: an open proposal of the project this one replaces (a rebase, a revision): it is
    closed in the same transaction, its closure naming this one. Proposals never change once
    submitted, so a change brought up to date is always a new proposal, backtested afresh;
    `start_backtest` False: an emergency revert's rollback, backtested once it is restored.
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
                frame, project=project.slug, declared=governance_selectors.declared_projects(project=project)
            )
        if not issues and frame == base.snapshot:
            issues = [FrameIssue((), f"the patch changes nothing in v{base.number}")]
        if not issues:
            issues = _scope_issues(author, base.snapshot, frame, project)
        if issues:
            raise ProposalInvalid(issues)
        scope = list(frame.get("scope") or [project.slug])
        warnings = frames.unknown_class_warnings(
            frame, carried=governance_selectors.carried_classes(scope=scope), scope=scope
        )
        if supersedes is not None:
            _check_open(supersedes, project=project, action="replace")
        proposal = _proposal_create(
            project=project, base=base, frame=frame, patch=patch, title=title, rationale=rationale,
            warnings=warnings, uid=uid, author=author, kind=kind, supersedes=supersedes, restores=restores,
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
                "kind": kind,
                "supersedes": supersedes.pk if supersedes else None,
                "restores": restores.number if restores else None,
            },
        )
        if supersedes is not None:
            verb = "rebased" if kind == ProposalKind.REBASE else "replaced"
            _close(
                supersedes, actor=author, superseded_by=proposal,
                reason=f"{verb} over v{base.number} as proposal #{proposal.pk}",
            )
        # robust: the proposal is committed whatever the queue does; a failed enqueue is logged
        if start_backtest:
            transaction.on_commit(lambda: backtest_enqueue(proposal=proposal, requested_by=author), robust=True)
    return proposal


def _proposal_create(
    *, project: Project, base: FrameVersion, frame: dict, patch: Any, title: str, rationale: str,
    warnings: list[str], uid: str, author, kind: str = ProposalKind.CHANGE,
    supersedes: Proposal | None = None, restores: FrameVersion | None = None,
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
        kind=kind,
        supersedes=supersedes,
        restores=restores,
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
    review, read from the backtest app). The only code that changes Proposal.state: every write
    that moves a proposal on calls it inside its own transaction: a promotion or a closure here,
    a backtest starting, finishing, failing or reviewed through backtest_changed (on_backtest_changed).
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
    access.access_propose(lead, project, action="split a proposal")
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


# --- rebase, rollback, close -------------------------------------------------------------------


def _check_open(proposal: Proposal, *, project: Project, action: str) -> None:
    if proposal.project_id != project.pk:
        raise GovernanceError(f"proposal #{proposal.pk} belongs to another project")
    state = Proposal.objects.values_list("state", flat=True).get(pk=proposal.pk)
    if state in FINAL_STATES:
        raise GovernanceError(f"proposal #{proposal.pk} is {state}: there is nothing to {action}")


def _close(proposal: Proposal, *, actor, reason: str, superseded_by: Proposal | None = None) -> ProposalClosure:
    """The closure row, the state moved to closed, the audit row: inside the caller's transaction."""
    closure = ProposalClosure.objects.create(
        proposal=proposal,
        closed_by=actor if getattr(actor, "pk", None) else None,
        reason=reason,
        superseded_by=superseded_by,
    )
    proposal_sync_state(proposal=proposal)
    audit_record(
        actor=actor,
        project=proposal.project,
        action="proposal.closed",
        obj=proposal,
        summary=f"proposal #{proposal.pk} closed: {reason}",
        payload={
            "proposal": proposal.pk,
            "reason": reason,
            "superseded_by": superseded_by.pk if superseded_by else None,
        },
    )
    return closure


def proposal_close(*, proposal: Proposal, lead, reason: str) -> ProposalClosure:
    """A lead closes an open proposal (stale or not) with a reason; it can no longer be backtested,
    reviewed or promoted. The closure is append-only: a closed proposal stays closed."""
    project = proposal.project
    access.access_propose(lead, project, action="close a proposal")
    reason = (reason or "").strip()
    if not reason:
        raise ProposalInvalid([FrameIssue(("reason",), "closing a proposal needs a reason")])
    with transaction.atomic():
        Project.objects.select_for_update().get(pk=project.pk)
        _check_open(proposal, project=project, action="close")
        return _close(proposal, actor=lead, reason=reason)


def proposal_rebase(*, proposal: Proposal, author, resolutions: dict[str, str] | None = None) -> Proposal:
    """Re-apply a stale proposal's patch over the promoted version: a NEW proposal (submitted
    proposals are immutable) that supersedes it, starts its own backtest, and so carries none of
    the old one's approvals; the old one is closed, naming the new.

    A key the current version changed since the old base, to another value than the patch gives
    it, is a conflict: without a resolution for each ("mine" keeps the proposal's value, "theirs"
    the current one) it raises RebaseConflict and writes nothing.
    """
    project = proposal.project
    access.access_propose(author, project, action="resubmit a proposal")
    with transaction.atomic():
        Project.objects.select_for_update().get(pk=project.pk)
        proposal = Proposal.objects.select_related("project", "base_version").get(pk=proposal.pk)
        _check_open(proposal, project=project, action="rebase")
        current, conflicts = selectors.rebase_plan(proposal=proposal)
        if current is None or current.pk == proposal.base_version_id:
            raise GovernanceError(
                f"proposal #{proposal.pk} is written over the current version: there is nothing to rebase"
            )
        patch, unresolved = frames.resolve_rebase(proposal.patch, conflicts, resolutions or {})
        if unresolved:
            raise RebaseConflict(unresolved, current=current)
        frame, _issues = frames.apply_patch(current.snapshot, patch)
        if frame == current.snapshot:
            raise ProposalInvalid(
                [FrameIssue((), f"v{current.number} already holds everything it changes: close it instead")]
            )
        chosen = {c.key: (resolutions or {})[c.key] for c in conflicts}
        note = (
            f"Rebased over v{current.number} from proposal #{proposal.pk} "
            f"(written over v{proposal.base_version.number})"
        )
        if chosen:
            note += "; conflicts resolved: " + ", ".join(f"{k} → {v}" for k, v in sorted(chosen.items()))
        rebased = proposal_submit(
            project=project,
            author=author,
            title=proposal.title,
            rationale=f"{proposal.rationale}\n\n{note}.".strip(),
            patch=patch,
            expected_base=current,
            kind=ProposalKind.REBASE,
            supersedes=proposal,
        )
        audit_record(
            actor=author,
            project=project,
            action="proposal.rebased",
            obj=rebased,
            summary=f"proposal #{proposal.pk} rebased over v{current.number} as #{rebased.pk}",
            payload={
                "from": proposal.pk,
                "to": rebased.pk,
                "old_base": proposal.base_version.number,
                "new_base": current.number,
                "resolutions": chosen,
            },
        )
    return rebased


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


def on_backtest_changed(sender, *, backtest, **kwargs) -> None:
    """backtest.lifecycle.backtest_changed: the proposal's state follows, in the same transaction."""
    proposal_sync_state(proposal=backtest.proposal)
