"""Reads of proposals: a project's list, conflicts between open ones, staleness, what blocks a promotion."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from authority.models import FrameVersion, Promotion
from authority.selectors import current_frame_version
from rules import frame_patch as frames
from selection.corpus.frames import approval_policy
from selection.models import Project

from ..models import FINAL_STATES, Proposal, ProposalClosure, ProposalState
from .evidence import evidence_for, with_latest_backtest_status


def proposal_rows(*, project: Project) -> QuerySet[Proposal]:
    """A project's proposals, newest first, each with its latest backtest's status (one query)."""
    return with_latest_backtest_status(
        Proposal.objects.filter(project=project)
        .select_related("author", "frame_version", "base_version", "closure", "closure__superseded_by")
        .order_by("-created_at", "-id")
    )


@dataclass(frozen=True)
class OpenConflict:
    """Another open proposal of the same project that changes some of the same keys."""

    proposal: Proposal
    keys: tuple[str, ...]


def _touched(proposal: Proposal) -> list[tuple[str, ...]]:
    return frames.patch_paths(proposal.patch)


# a proposal that can no longer be promoted as it stands: failed, rejected, closed or promoted
DEAD_STATES = (*FINAL_STATES, ProposalState.FAILED, ProposalState.REJECTED)


def open_conflicts(proposals, *, among=None) -> dict[int, list[OpenConflict]]:
    """proposal id -> the other live proposals (of `among`, default `proposals`) of its project that
    touch an overlapping key: one promoted first makes the other stale, with that key to resolve.
    A dead proposal (DEAD_STATES) neither has conflicts nor is one."""
    pool = [p for p in (proposals if among is None else among) if p.state not in DEAD_STATES]
    touched = {p.pk: _touched(p) for p in pool}
    result: dict[int, list[OpenConflict]] = {}
    for proposal in proposals:
        if proposal.state in DEAD_STATES:
            continue
        mine = touched.get(proposal.pk) or _touched(proposal)
        for other in pool:
            if other.pk == proposal.pk or other.project_id != proposal.project_id:
                continue
            keys = sorted(
                {frames.format_path(a if len(a) <= len(b) else b) for a in mine for b in touched[other.pk]
                 if frames.paths_overlap(a, b)}
            )
            if keys:
                result.setdefault(proposal.pk, []).append(OpenConflict(other, tuple(keys)))
    return result


def open_proposals(*, project: Project) -> list[Proposal]:
    return list(
        Proposal.objects.filter(project=project)
        .exclude(state__in=FINAL_STATES)
        .select_related("author", "base_version", "frame_version")
        .order_by("-created_at", "-id")
    )


def stale_reason(proposal: Proposal, *, current: FrameVersion | None) -> str | None:
    """Why an open proposal is stale, in words: which version was promoted over its base, from
    which proposal, and which of its keys that version also changed (the rebase will ask)."""
    if proposal.state in FINAL_STATES or current is None or current.pk == proposal.base_version_id:
        return None
    source = getattr(current, "proposal", None)  # None for an imported version
    via = f' from proposal #{source.pk} "{source.title}"' if source is not None else ""
    text = f"v{current.number} was promoted{via} after it was written over v{proposal.base_version.number}"
    conflicts = frames.rebase_conflicts(proposal.base_version.snapshot, current.snapshot, proposal.patch)
    if conflicts:
        return text + "; that version also changed " + ", ".join(c.key for c in conflicts)
    return text + "; no key it changes moved to another value, so it rebases cleanly"


def rebase_plan(*, proposal: Proposal) -> tuple[FrameVersion | None, list[frames.KeyConflict]]:
    """The version a rebase would apply `proposal` over (None when none is promoted) and the keys
    the current version changed since its base to another value than its patch gives them."""
    current = current_frame_version(project=proposal.project)
    if current is None:
        return None, []
    return current, frames.rebase_conflicts(proposal.base_version.snapshot, current.snapshot, proposal.patch)


def current_with_proposal(*, project: Project) -> FrameVersion | None:
    """The current version, with the proposal that introduced it joined (for stale reasons)."""
    promotion = (
        Promotion.objects.filter(project=project)
        .select_related("frame_version", "frame_version__proposal")
        .order_by("-sequence")
        .first()
    )
    return promotion.frame_version if promotion else None


def proposal_successor(proposal: Proposal) -> Proposal | None:
    """The proposal that replaced this one (a rebase or a revision), if any."""
    return Proposal.objects.filter(supersedes=proposal).order_by("-created_at", "-id").first()


def proposal_closure(proposal: Proposal) -> ProposalClosure | None:
    try:
        return proposal.closure
    except ObjectDoesNotExist:
        return None


def proposal_by_id(*, proposal_id: int) -> Proposal:
    return get_object_or_404(
        Proposal.objects.select_related(
            "project", "project__corpus", "author", "frame_version", "base_version"
        ),
        pk=proposal_id,
    )


def promotion_blockers(*, proposal: Proposal) -> list[str]:
    """Why `proposal` may not be promoted now; empty when it may.

    The base version must still be current, or promoting would silently undo whatever was
    promoted since (a rollback is a new proposal); the rest — a passed and approved latest
    backtest still bound to what runs now — is the evidence the backtest app supplies.
    """
    if proposal.state == ProposalState.PROMOTED:
        return ["this proposal is already promoted"]
    if proposal.state == ProposalState.CLOSED:
        return ["this proposal is closed"]
    blockers = []
    current = current_frame_version(project=proposal.project)
    if current is None or current.id != proposal.base_version_id:
        now = f"v{current.number}" if current else "no version"
        blockers.append(
            f"it was written over v{proposal.base_version.number}, but {now} is current now: "
            "submit the change again over the current version"
        )
    return blockers + list(evidence_for(proposal).blockers)


def scope_widening(*, proposal: Proposal) -> list[str]:
    """Projects the proposal's frame admits units from that its base frame did not."""
    slug = proposal.project.slug
    before = set(proposal.base_version.snapshot.get("scope") or [slug])
    after = proposal.frame_version.snapshot.get("scope") or [slug]
    return [s for s in after if s not in before]


def promoter_blockers(*, proposal: Proposal, lead) -> list[str]:
    """Why this lead may not promote this proposal under the project's approval policy."""
    current = current_frame_version(project=proposal.project)
    if approval_policy(current.snapshot if current else None).approver_may_promote:
        return []
    if lead.pk in evidence_for(proposal).approvers:
        return [
            f"{lead.username} approved the backtest; the project's policy wants "
            "another lead to promote it"
        ]
    return []


def derived_proposal_state(*, proposal: Proposal) -> str:
    """The state the append-only rows imply: promoted, else what its latest backtest says."""
    if Promotion.objects.filter(frame_version_id=proposal.frame_version_id).exists():
        return ProposalState.PROMOTED
    if ProposalClosure.objects.filter(proposal_id=proposal.pk).exists():
        return ProposalState.CLOSED
    return evidence_for(proposal).state
