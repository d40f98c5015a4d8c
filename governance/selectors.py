"""Reads for the governance pages; list pages stay at a fixed number of queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.shortcuts import get_object_or_404

from authority import access
from authority.models import AuditEntry, FrameVersion, Promotion
from authority.selectors import current_frame_version
from selection.corpus.frames import approval_policy, listed_classes
from selection.models import MemoryUnit, Project

from . import frames
from .evidence import evidence_for, with_latest_backtest_status
from .models import FINAL_STATES, Proposal, ProposalClosure, ProposalState


@dataclass(frozen=True)
class ProjectRow:
    project: Project
    corpus_name: str
    current_version: int | None
    unit_count: int
    task_count: int


def project_overview(*, user) -> list[ProjectRow]:
    """The projects `user` holds a role in (all for a superuser): others are not even listed."""
    latest = Promotion.objects.filter(project=OuterRef("pk")).order_by("-sequence")
    projects = (
        access.readable_projects(user, Project.objects.all())
        .select_related("corpus")
        .annotate(
            current_version=Subquery(latest.values("frame_version__number")[:1]),
            unit_count=Count("units", distinct=True),
            task_count=Count("tasks", distinct=True),
        )
        .order_by("corpus__name", "position", "slug")
    )
    return [
        ProjectRow(p, p.corpus.name, p.current_version, p.unit_count, p.task_count)
        for p in projects
    ]


# --- projects and frame versions --------------------------------------------------------------


def project_for_slug(*, slug: str) -> Project:
    return get_object_or_404(Project.objects.select_related("corpus"), slug=slug)


def declared_projects(*, project: Project) -> list[str]:
    """Slugs a frame of `project` may scope: the projects its corpus declares."""
    return list(
        Project.objects.filter(corpus_id=project.corpus_id)
        .order_by("position", "slug")
        .values_list("slug", flat=True)
    )


def carried_classes(*, scope: list[str]) -> set[str]:
    """Evidence classes carried by at least one unit of the given projects."""
    return set(
        MemoryUnit.objects.filter(project__slug__in=scope)
        .values_list("evidence_class", flat=True)
        .distinct()
    )


@dataclass(frozen=True)
class WorkTypeRow:
    name: str
    classes: tuple[str, ...]
    open_loop: bool
    description: str = ""  # long form (corpus format 1.1)
    cues: tuple[str, ...] = ()


@dataclass(frozen=True)
class FrameView:
    """A snapshot as the project page shows it; work types sorted by name, as in the engine."""

    snapshot: dict
    work_types: tuple[WorkTypeRow, ...]
    columns: int
    scope: tuple[str, ...]
    default_classes: tuple[str, ...]
    class_pull: int | None
    open_loop_work_types: tuple[str, ...]
    gates: dict
    extras: dict


def frame_view(snapshot: dict) -> FrameView:
    work_types = snapshot.get("work_types") or {}
    open_loop = tuple(snapshot.get("open_loop_work_types") or ())
    rows = tuple(
        WorkTypeRow(
            name,
            tuple(listed_classes(entry) or ()),
            name in open_loop,
            (entry.get("description") or "") if isinstance(entry, dict) else "",
            tuple(entry.get("cues") or ()) if isinstance(entry, dict) else (),
        )
        for name, entry in sorted(work_types.items())
    )
    return FrameView(
        snapshot=snapshot,
        work_types=rows,
        columns=max((len(r.classes) for r in rows), default=0),
        scope=tuple(snapshot.get("scope") or ()),
        default_classes=tuple(snapshot.get("default_classes") or ()),
        class_pull=snapshot.get("class_pull"),
        open_loop_work_types=open_loop,
        gates=snapshot.get("gates") or {},
        extras={k: v for k, v in snapshot.items() if k.startswith("x-")},
    )


@dataclass(frozen=True)
class VersionRow:
    version: FrameVersion
    parent_number: int | None
    promotions: tuple[int, ...]  # promotion sequences that made it current
    proposal_id: int | None
    current: bool


def frame_history(*, project: Project) -> list[VersionRow]:
    """Every version of the project's frame, newest first, in three queries whatever its length."""
    versions = list(
        FrameVersion.objects.filter(project=project)
        .select_related("parent", "proposal")
        .order_by("-number")
    )
    promotions: dict[int, list[int]] = {}
    current_id = None
    for version_id, sequence in (
        Promotion.objects.filter(project=project)
        .order_by("sequence")
        .values_list("frame_version_id", "sequence")
    ):
        promotions.setdefault(version_id, []).append(sequence)
        current_id = version_id
    rows = []
    for version in versions:
        try:
            proposal_id = version.proposal.id
        except ObjectDoesNotExist:
            proposal_id = None
        rows.append(
            VersionRow(
                version=version,
                parent_number=version.parent.number if version.parent else None,
                promotions=tuple(promotions.get(version.id, ())),
                proposal_id=proposal_id,
                current=version.id == current_id,
            )
        )
    return rows


@dataclass(frozen=True)
class ProposalDrafts:
    """A proposal and the unpromoted versions it drafted, under the version they change."""

    proposal: Proposal
    drafts: tuple[VersionRow, ...]


@dataclass(frozen=True)
class PromotedRow:
    row: VersionRow | None  # None: the drafts no promoted version anchors
    proposals: tuple[ProposalDrafts, ...]


def frame_history_tree(*, project: Project) -> list[PromotedRow]:
    """The version history as people read it: each version that was ever promoted (the import
    included), newest first, and under it the proposals drafted over it with their unpromoted
    versions. A draft whose base was never promoted stays under that base's nearest promoted
    ancestor, so no version is left out. Four queries whatever the length."""
    rows = frame_history(project=project)
    by_id = {r.version.id: r for r in rows}
    promoted = [r for r in rows if r.promotions or r.version.parent_id is None]
    promoted_ids = {r.version.id for r in promoted}
    proposals = {
        p.frame_version_id: p
        for p in Proposal.objects.filter(project=project).select_related("author")
    }

    def anchor(version_id: int | None) -> int | None:
        # climb from a draft's base to the nearest version that was promoted
        seen = set()
        while version_id is not None and version_id not in promoted_ids and version_id not in seen:
            seen.add(version_id)
            row = by_id.get(version_id)
            version_id = row.version.parent_id if row else None
        return version_id

    grouped: dict[int | None, dict[int, list[VersionRow]]] = {}
    owners: dict[int, Proposal] = {}
    for r in rows:  # newest first
        if r.version.id in promoted_ids:
            continue
        proposal = proposals.get(r.version.id)
        base_id = proposal.base_version_id if proposal else r.version.parent_id
        key = proposal.pk if proposal else -r.version.id
        if proposal:
            owners[key] = proposal
        grouped.setdefault(anchor(base_id), {}).setdefault(key, []).append(r)

    def drafts_under(version_id: int | None) -> tuple[ProposalDrafts, ...]:
        return tuple(
            ProposalDrafts(proposal=owners.get(key), drafts=tuple(versions))
            for key, versions in grouped.get(version_id, {}).items()
        )

    tree = [PromotedRow(row=r, proposals=drafts_under(r.version.id)) for r in promoted]
    orphans = drafts_under(None)
    if orphans:  # drafts with no promoted ancestor (none in practice): shown, never hidden
        tree.append(PromotedRow(row=None, proposals=orphans))
    return tree


def frame_version(*, project: Project, number: int) -> FrameVersion:
    return get_object_or_404(FrameVersion, project=project, number=number)


# --- proposals ---------------------------------------------------------------------------------


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


def open_conflicts(proposals, *, among=None) -> dict[int, list[OpenConflict]]:
    """proposal id -> the other open proposals (of `among`, default `proposals`) of its project that
    touch an overlapping key: one promoted first makes the other stale, with that key to resolve."""
    pool = [p for p in (proposals if among is None else among) if p.state not in FINAL_STATES]
    touched = {p.pk: _touched(p) for p in pool}
    result: dict[int, list[OpenConflict]] = {}
    for proposal in proposals:
        if proposal.state in FINAL_STATES:
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


# --- audit log ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditFilters:
    project: Project | None = None
    action: str = ""
    actor: str = ""
    since: date | None = None
    until: date | None = None


def audit_entries(*, user, filters: AuditFilters) -> QuerySet[AuditEntry]:
    """The entries `user` may read (see access.readable_projects), filtered, newest first."""
    entries = AuditEntry.objects.select_related("actor", "project").order_by("-at", "-id")
    if not access.reads_all_projects(user):
        visible = Q(project__in=access.readable_projects(user, Project.objects.all()).values("pk"))
        if access.reads_unscoped_audit(user):
            visible |= Q(project__isnull=True)
        entries = entries.filter(visible)
    if filters.project is not None:
        entries = entries.filter(project=filters.project)
    if filters.action:
        entries = entries.filter(action=filters.action)
    if filters.actor:
        entries = entries.filter(actor_label=filters.actor)
    if filters.since:
        entries = entries.filter(at__date__gte=filters.since)
    if filters.until:
        entries = entries.filter(at__date__lte=filters.until)
    return entries


def audit_actions() -> list[str]:
    return list(AuditEntry.objects.order_by("action").values_list("action", flat=True).distinct())
