"""Reads for the governance pages; list pages stay at a fixed number of queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.shortcuts import get_object_or_404

from backtest.models import Approval, ApprovalVerdict, Backtest, BacktestDecision, BacktestStatus
from selection.models import MemoryUnit, Project

from . import access
from .models import AuditEntry, FrameVersion, Promotion, Proposal, ProposalState


@dataclass(frozen=True)
class ProjectRow:
    project: Project
    corpus_name: str
    current_version: int | None
    unit_count: int
    task_count: int


def current_frame_version(*, project: Project) -> FrameVersion | None:
    promotion = (
        Promotion.objects.filter(project=project)
        .select_related("frame_version")
        .order_by("-sequence")
        .first()
    )
    return promotion.frame_version if promotion else None


def project_overview(*, user=None) -> list[ProjectRow]:
    latest = Promotion.objects.filter(project=OuterRef("pk")).order_by("-sequence")
    projects = (
        Project.objects.select_related("corpus")
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


# --- engine and backtest bindings -------------------------------------------------------------


def current_engine_version() -> str | None:
    """selection.engine.ENGINE_VERSION when the engine declares one, else None (check skipped)."""
    try:
        from selection.engine import ENGINE_VERSION  # type: ignore[attr-defined]
    except ImportError as error:
        # TODO: drop this fallback once every engine declares ENGINE_VERSION; until then promotion
        # skips the engine binding. A broken import inside the engine is a bug and surfaces.
        if error.name not in ("selection.engine",):
            raise
        return None
    return str(ENGINE_VERSION)


def current_task_set_digest(*, project: Project) -> str | None:
    """The digest of the project's task set now, if the backtest app can compute it, else None."""
    try:
        from backtest.services import backtest_task_set_digest  # type: ignore[attr-defined]
    except ImportError as error:
        if error.name not in ("backtest.services", "backtest"):
            raise
        return None
    return backtest_task_set_digest(project=project)


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
        WorkTypeRow(name, tuple(classes or ()), name in open_loop)
        for name, classes in sorted(work_types.items())
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


def frame_version(*, project: Project, number: int) -> FrameVersion:
    return get_object_or_404(FrameVersion, project=project, number=number)


# --- proposals ---------------------------------------------------------------------------------


def proposal_rows(*, project: Project) -> QuerySet[Proposal]:
    """A project's proposals, newest first, each with its latest backtest's status (one query)."""
    latest = Backtest.objects.filter(proposal=OuterRef("pk")).order_by("-created_at", "-id")
    return (
        Proposal.objects.filter(project=project)
        .select_related("author", "frame_version", "base_version")
        .annotate(latest_backtest_status=Subquery(latest.values("status")[:1]))
        .order_by("-created_at", "-id")
    )


def proposal_by_id(*, proposal_id: int) -> Proposal:
    return get_object_or_404(
        Proposal.objects.select_related(
            "project", "project__corpus", "author", "frame_version", "base_version"
        ),
        pk=proposal_id,
    )


def proposal_backtests(*, proposal: Proposal) -> list[Backtest]:
    """Newest first, with decision, approval and reviewer joined (one query)."""
    return list(
        Backtest.objects.filter(proposal=proposal)
        .select_related(
            "decision",
            "approval",
            "approval__reviewer",
            "requested_by",
            "candidate_version",
            "baseline_version",
        )
        .order_by("-created_at", "-id")
    )


def latest_backtest(*, proposal: Proposal) -> Backtest | None:
    return (
        Backtest.objects.filter(proposal=proposal)
        .select_related("decision", "approval", "candidate_version", "baseline_version")
        .order_by("-created_at", "-id")
        .first()
    )


def _related(obj, name: str):
    try:
        return getattr(obj, name)
    except ObjectDoesNotExist:
        return None


def backtest_decision(backtest: Backtest) -> BacktestDecision | None:
    return _related(backtest, "decision")


def backtest_approval(backtest: Backtest) -> Approval | None:
    return _related(backtest, "approval")


def promotion_blockers(*, proposal: Proposal) -> list[str]:
    """Why `proposal` may not be promoted now; empty when it may.

    Promotion needs the proposal's LATEST backtest to have passed and to carry an approving
    review still bound to what runs now: the same candidate frame version, the same task set and
    the current engine version. The base version must still be current, or promoting would
    silently undo whatever was promoted since (a rollback is a new proposal).
    """
    if proposal.state == ProposalState.PROMOTED:
        return ["this proposal is already promoted"]
    blockers = []
    current = current_frame_version(project=proposal.project)
    if current is None or current.id != proposal.base_version_id:
        now = f"v{current.number}" if current else "no version"
        blockers.append(
            f"it was written over v{proposal.base_version.number}, but {now} is current now: "
            "submit the change again over the current version"
        )
    backtest = latest_backtest(proposal=proposal)
    if backtest is None:
        return blockers + ["no backtest has run for it yet"]
    label = f"the latest backtest (#{backtest.pk})"
    if backtest.status != BacktestStatus.FINISHED:
        return blockers + [f"{label} is {backtest.status}, not finished"]
    decision = backtest_decision(backtest)
    if decision is None:
        return blockers + [f"{label} has no decision"]
    if not decision.passed:
        blockers.append(f"{label} failed its gates")
    if backtest.candidate_version_id != proposal.frame_version_id:
        blockers.append(
            f"{label} replayed v{backtest.candidate_version.number}, not this proposal's version"
        )
    if current is not None and backtest.baseline_version_id != current.id:
        blockers.append(
            f"{label} compared against v{backtest.baseline_version.number}, "
            f"but v{current.number} is current"
        )
    approval = backtest_approval(backtest)
    if approval is None:
        return blockers + [f"{label} has not been reviewed"]
    if approval.verdict != ApprovalVerdict.APPROVE:
        return blockers + [f"a reviewer rejected {label}"]
    if approval.frame_version_id != proposal.frame_version_id:
        blockers.append("the approval is bound to another frame version")
    if approval.task_set_digest != backtest.task_set_digest:
        blockers.append("the approval is bound to another task set than the backtest replayed")
    engine = current_engine_version()
    if engine is not None and approval.engine_version != engine:
        blockers.append(
            f"it was approved under engine {approval.engine_version}, "
            f"but the engine is {engine} now: run a new backtest"
        )
    digest = current_task_set_digest(project=proposal.project)
    if digest is not None and digest != approval.task_set_digest:
        blockers.append(
            "the project's task set changed since the approved backtest: run a new backtest"
        )
    return blockers


def review_blockers(*, backtest: Backtest) -> list[str]:
    """Why `backtest` may not be reviewed now; empty when it may."""
    if backtest.status != BacktestStatus.FINISHED:
        return [f"backtest #{backtest.pk} is {backtest.status}, not finished"]
    if backtest_decision(backtest) is None:
        return [f"backtest #{backtest.pk} has no decision yet"]
    if backtest_approval(backtest) is not None:
        return [f"backtest #{backtest.pk} is already reviewed"]
    if backtest.proposal.state == ProposalState.PROMOTED:
        return ["the proposal is already promoted"]
    latest = latest_backtest(proposal=backtest.proposal)
    if latest is not None and latest.pk != backtest.pk:
        return [f"backtest #{backtest.pk} is not the proposal's latest (#{latest.pk} is)"]
    return []


def derived_proposal_state(*, proposal: Proposal) -> str:
    """The state the append-only rows imply: promotion, else latest backtest and its review."""
    if Promotion.objects.filter(frame_version_id=proposal.frame_version_id).exists():
        return ProposalState.PROMOTED
    backtest = latest_backtest(proposal=proposal)
    if backtest is None or backtest.status == BacktestStatus.ERROR:
        # an errored run judged nothing: the proposal waits for another backtest
        return ProposalState.PROPOSED
    if backtest.status != BacktestStatus.FINISHED:
        return ProposalState.BACKTESTING
    decision = backtest_decision(backtest)
    if decision is None:
        return ProposalState.BACKTESTING
    approval = backtest_approval(backtest)
    if approval is not None:
        return (
            ProposalState.APPROVED
            if approval.verdict == ApprovalVerdict.APPROVE
            else ProposalState.REJECTED
        )
    return ProposalState.PASSED if decision.passed else ProposalState.FAILED


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
        visible = Q(project__in=access.readable_projects(user).values("pk"))
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
