"""Reads for the governance pages (projects, frame versions, the audit log) in a fixed number of queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.shortcuts import get_object_or_404

from authority import access
from authority.models import AuditEntry, FrameVersion, Promotion
from backtest.selectors import declared_projects as declared_projects  # the projects a frame may scope
from selection.corpus.frames import listed_classes
from selection.models import MemoryUnit, Project

from .models import Proposal


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
