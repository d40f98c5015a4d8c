"""Reads for the trace explorer: trace history, one trace explained, funnels over many traces.

List reads stay at a fixed number of queries. Ledgers are read only through selection.evaluation.scoring.
Re-running the engine (verify, counterfactuals) reads and computes; it never writes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from django.db.models import Count, Exists, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from authority import access
from authority.selectors import current_frame_version
from selection.engine.attribution import Attribution, attribute
from selection.engine.counterfactual import CounterfactualReport, counterfactuals
from selection.engine.explain import (
    Check,
    LossFunnel,
    NearMiss,
    Outcome,
    check_rerun,
    check_stored_bundle,
    loss_funnel,
    near_misses,
    sum_funnels,
    trace_outcomes,
)
from selection.engine.index import CorpusIndex
from selection.engine.outputs import SelectionResult
from selection.engine.reason_codes import Disposition, ReasonCode
from selection.engine.routing.codes import LOAD_ORDER, LocalCode, RouteCode
from selection.engine.routing.types import RoutingInputs
from selection.engine.types import SelectionRequest
from selection.evaluation import scoring
from selection.memory import store
from selection.memory.store import trace_result
from selection.models import (
    EvaluationRun,
    MemoryUnit,
    OutcomeVerdict,
    Project,
    TombstoneKind,
    Trace,
    TraceCandidate,
    TraceOutcome,
)
from selection.serving.selections import SelectionError, SelectionInputs, selection_request, selection_run
from selection.traces import redaction

# --------------------------------------------------------------------------------------------
# History
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceFilters:
    project: str = ""
    frame_version: int | None = None
    since: date | None = None
    until: date | None = None
    task: str = ""  # task id (uid), exact
    reason: str = ""
    disposition: str = ""
    unit: str = ""  # a candidate's unit id, exact
    source: str = ""  # a source (select, api, ...) or a group of them (SOURCE_GROUPS)
    condition: str = ""
    work_type: str = ""  # the work frame's work type, exact
    outcome: str = ""  # a recorded outcome's verdict, or "none": no outcome recorded
    text: str = ""  # words in the query or the task id


# the sources a trace can come from, grouped as a reader asks for them: agent traces are the live
# selections (the select command, the API, the MCP server)
SOURCE_GROUPS: dict[str, tuple[str, ...]] = {
    "agent": ("select", "api", "mcp"),
    "evaluation": ("evaluation",),
    "backtest": ("backtest",),
    "shadow": ("shadow",),
    "health": ("health",),
    "replay": ("replay",),
}
MAX_SEARCH_TEXT = 200


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def trace_search(*, user, filters: TraceFilters) -> QuerySet[Trace]:
    """Traces of the projects `user` may read, newest first; candidate filters match one candidate
    (reason, disposition and unit together), so each trace appears once.
    """
    candidate_count = (
        TraceCandidate.objects.filter(trace=OuterRef("pk"))
        .order_by()
        .values("trace")
        .annotate(n=Count("pk"))
        .values("n")
    )
    traces = (
        Trace.objects.filter(project__in=access.readable_projects(user, Project.objects.all()))
        .select_related("project", "task")
        .defer("header", "bundle")
        .annotate(candidate_count=Subquery(candidate_count, output_field=IntegerField()))
        .order_by("-created_at", "-id")
    )
    f = filters
    if f.project:
        traces = traces.filter(project__slug=f.project)
    if f.frame_version is not None:
        traces = traces.filter(frame_version=f.frame_version)
    if f.since:
        traces = traces.filter(created_at__gte=_day_start(f.since))
    if f.until:
        traces = traces.filter(created_at__lt=_day_start(f.until + timedelta(days=1)))
    if f.task:
        traces = traces.filter(task__uid=f.task)
    if f.source:
        traces = traces.filter(source__in=SOURCE_GROUPS.get(f.source, (f.source,)))
    if f.condition:
        traces = traces.filter(condition=f.condition)
    if f.work_type:
        traces = traces.filter(header__work_frame__work_type=f.work_type)
    if f.outcome == "none":
        traces = traces.filter(~Exists(TraceOutcome.objects.filter(trace=OuterRef("pk"))))
    elif f.outcome:
        traces = traces.filter(Exists(TraceOutcome.objects.filter(trace=OuterRef("pk"), verdict=f.outcome)))
    for word in f.text.split()[:8]:
        traces = traces.filter(Q(query__icontains=word) | Q(task__uid__icontains=word))
    match = Q()
    if f.reason:
        match &= Q(reason_code=f.reason)
    if f.disposition:
        match &= Q(disposition=f.disposition)
    if f.unit:
        match &= Q(unit_uid=f.unit)
    if match:
        traces = traces.filter(Exists(TraceCandidate.objects.filter(match, trace=OuterRef("pk"))))
    return traces


def trace_search_choices(*, user) -> dict[str, list]:
    """Values the history filters offer: readable projects, reason codes and dispositions."""
    readable = access.readable_projects(user, Project.objects.all())
    return {
        "projects": list(readable.order_by("slug").values_list("slug", flat=True)),
        # routed units carry their route code as their candidate reason (or OMIT_BUDGET)
        "reasons": [r.value for r in ReasonCode]
        + [c.value for c in LOAD_ORDER]
        + [RouteCode.OMIT_BUDGET.value, LocalCode.LOCAL_ADDED.value],
        "dispositions": [d.value for d in Disposition],
        "sources": list(SOURCE_GROUPS),
        "outcomes": [*OutcomeVerdict.values, "none"],
        "work_types": _work_types(readable),
    }


def _work_types(projects) -> list[str]:
    """The work types the readable projects' current frames list."""
    names: set[str] = set()
    for project in projects:
        current = current_frame_version(project=project)
        if current is not None:
            names.update((current.snapshot or {}).get("work_types") or {})
    return sorted(names)


# --------------------------------------------------------------------------------------------
# One trace
# --------------------------------------------------------------------------------------------


def trace_by_id(*, pk: int) -> Trace:
    return get_object_or_404(Trace.objects.select_related("project", "task"), pk=pk)


def readable_trace(*, user, pk: int, expired_ok: bool = False) -> tuple[Trace, access.Capabilities]:
    """The trace and what `user` may do with it; an expired trace (retention removed its payload)
    is a 404 that says so, unless the caller shows the tombstone (`expired_ok`)."""
    trace = trace_by_id(pk=pk)
    caps = access.access_read(user, trace.project)
    if trace.expired_at is not None and not expired_ok:
        raise Http404(
            f"trace #{trace.pk} expired under {trace.project.slug}'s retention policy on "
            f"{trace.expired_at:%Y-%m-%d}: only its ids and digests remain"
        )
    return trace, caps


def _task_ledger(trace: Trace) -> dict[str, str]:
    return scoring.ledger_for_task(trace.task) if trace.task_id else {}


def _present(corpus_id: int, uids) -> set[str]:
    return set(MemoryUnit.objects.filter(corpus_id=corpus_id, uid__in=list(uids)).values_list("uid", flat=True))


@dataclass
class TraceExplained:
    """Everything the trace page shows that is computed rather than stored."""

    trace: Trace
    result: SelectionResult
    ledger: dict[str, str]
    attribution: Attribution | None
    funnel: LossFunnel | None
    near_misses: tuple[NearMiss, ...]
    missing_must: list[tuple[str, str]] = field(default_factory=list)  # (unit, stage) not candidates
    redacted: int = 0  # bundle items of projects the reader holds no role in, shown by id only

    @property
    def ecodes(self) -> dict[str, str]:
        if self.attribution is None:
            return {}
        return {e.unit_id: e.code for e in self.attribution.units}


def trace_read(trace: Trace, *, user) -> tuple[SelectionResult, int]:
    """The stored trace as `user` may see it: units of projects they hold no role in redacted
    (selection.traces.redaction), and how many bundle items were. Every page, export, API route and MCP
    tool that shows a trace's bundle or coalescing steps reads it here."""
    return redaction.redacted_result(trace_result(trace), readable=redaction.readable_slugs(user))


def trace_explained(trace: Trace, *, user) -> TraceExplained:
    """The trace page's computed parts, for `user`: near misses are computed on the stored text,
    then the result is redacted for the reader (trace_read)."""
    result = trace_result(trace)
    engine_trace = result.trace
    ledger = _task_ledger(trace)
    corpus_id = trace.project.corpus_id
    attribution = funnel = None
    missing: list[tuple[str, str]] = []
    if ledger:
        wanted = [u for u, label in ledger.items() if label in ("MUST", "SHOULD")]
        present = _present(corpus_id, wanted)
        # E6: a recorded outcome says the answer failed although the evidence was present
        reader_failed = trace.outcomes.filter(verdict=OutcomeVerdict.FAILED).exists()
        attribution = attribute(engine_trace, ledger, present, reader_failed=reader_failed)
        funnel = loss_funnel(trace_outcomes(engine_trace.candidates), ledger, present)
        candidates = {c.unit_id for c in engine_trace.candidates}
        missing = [(u, stage) for u, stage in funnel.units if u not in candidates]
    omitted = [c.unit_id for c in engine_trace.candidates if c.disposition == Disposition.BUDGET_OMITTED]
    units = store.units_by_uid(corpus_id=corpus_id, uids=omitted)
    misses = near_misses(engine_trace, result.bundle, units)
    shown, redacted = redaction.redacted_result(result, readable=redaction.readable_slugs(user))
    return TraceExplained(
        trace=trace,
        result=shown,
        ledger=ledger,
        attribution=attribution,
        funnel=funnel,
        near_misses=misses,
        missing_must=missing,
        redacted=redacted,
    )


def stored_inputs(trace: Trace, result: SelectionResult) -> SelectionInputs:
    """The inputs the trace was made from, as selection_run takes them (vectors recomputed)."""
    engine_trace = result.trace
    return SelectionInputs(
        project_frame=engine_trace.project_frame,
        work_frame=engine_trace.work_frame,
        query=engine_trace.query,
        budget_tokens=engine_trace.budget_tokens,
        condition=engine_trace.condition,
        standpoint=engine_trace.standpoint,
        # the oracle reads the ledger; no other condition is handed it
        ledger=_task_ledger(trace) if engine_trace.condition == "CO" else None,
        use_dense=engine_trace.retriever.dense != "none",
        # local overlay units are private and not in the trace: a re-run is a shared run
        routing=engine_trace.routing.inputs if engine_trace.routing else RoutingInputs(),
    )


def stored_request(trace: Trace, result: SelectionResult, index: CorpusIndex) -> SelectionRequest:
    """The engine request the trace was made from, built by the one request builder."""
    return selection_request(stored_inputs(trace, result), index)


@dataclass(frozen=True)
class Verification:
    stored: list[Check]
    rerun: list[Check]
    rerun_error: str = ""
    erased: tuple[str, ...] = ()  # the trace's erasure tombstones, in words: why the checks differ
    @property
    def stored_ok(self) -> bool:
        return all(c.ok for c in self.stored)

    @property
    def rerun_ok(self) -> bool:
        return bool(self.rerun) and all(c.ok for c in self.rerun)


def trace_verify(trace: Trace) -> Verification:
    """Recompute the bundle digest from the stored rendered text, and again by re-running the
    engine with the stored inputs. Writes nothing.
    """
    result = trace_result(trace)
    stored = check_stored_bundle(result.trace, result.bundle, trace.bundle_digest)
    erased = tuple(str(stone) for stone in trace.tombstones.filter(kind=TombstoneKind.ERASED).order_by("sequence"))
    try:
        index = store.corpus_index(trace.project.corpus_id)
        rerun = selection_run(stored_inputs(trace, result), index, config=result.trace.config)
    except (SelectionError, LookupError) as error:
        return Verification(stored, [], str(error), erased)
    return Verification(stored, check_rerun(result.trace, trace.bundle_digest, rerun.trace), erased=erased)


def trace_counterfactual(trace: Trace, unit_uid: str) -> CounterfactualReport:
    result = trace_result(trace)
    index = store.corpus_index(trace.project.corpus_id)
    return counterfactuals(result.trace, unit_uid, index, stored_request(trace, result, index))


# --------------------------------------------------------------------------------------------
# Funnels over many traces: an evaluation, a backtest
# --------------------------------------------------------------------------------------------


def trace_funnels(trace_ids) -> dict[int, LossFunnel]:
    """Trace pk -> its loss funnel against its own task's ledger, in four queries whatever the
    number of traces. Traces without a task (or whose task has no ledger) count no MUST unit.
    """
    rows = list(
        Trace.objects.filter(pk__in=list(trace_ids), task__isnull=False).values_list(
            "pk", "task_id", "project__corpus_id"
        )
    )
    ledgers = _ledgers(sorted({task_id for _, task_id, _ in rows}))
    wanted = sorted({u for ledger in ledgers.values() for u, lab in ledger.items() if lab == "MUST"})
    present: dict[int, set[str]] = defaultdict(set)
    for corpus_id, uid in MemoryUnit.objects.filter(
        corpus_id__in={corpus for _, _, corpus in rows}, uid__in=wanted
    ).values_list("corpus_id", "uid"):
        present[corpus_id].add(uid)
    outcomes: dict[int, dict[str, Outcome]] = defaultdict(dict)
    for trace_id, uid, disposition, reason, eligible in TraceCandidate.objects.filter(
        trace_id__in=[pk for pk, _, _ in rows], unit_uid__in=wanted
    ).values_list("trace_id", "unit_uid", "disposition", "reason_code", "record__eligible"):
        outcomes[trace_id][uid] = Outcome(disposition, reason, bool(eligible))
    return {
        pk: loss_funnel(outcomes.get(pk, {}), ledgers.get(task_id, {}), present[corpus]) for pk, task_id, corpus in rows
    }


def traces_funnel(trace_ids) -> LossFunnel:
    """The loss funnel summed over traces (an evaluation condition, a backtest side)."""
    return sum_funnels(trace_funnels(trace_ids).values())


def grouped_funnels(groups: dict[str, list[int]]) -> dict[str, LossFunnel]:
    per_trace = trace_funnels([pk for ids in groups.values() for pk in ids])
    return {key: sum_funnels(per_trace[pk] for pk in ids if pk in per_trace) for key, ids in groups.items()}


def _ledgers(task_ids: list[int]) -> dict[int, dict[str, str]]:
    return scoring.ledgers_for_tasks(task_ids)


def evaluation_funnels(evaluation) -> dict[str, LossFunnel]:
    """Condition (and variant, when not declared) -> the funnel summed over its runs."""
    groups: dict[str, list[int]] = defaultdict(list)
    for condition, variant, trace_id in (
        EvaluationRun.objects.filter(evaluation=evaluation)
        .order_by("condition", "variant", "task_id")
        .values_list("condition", "variant", "trace_id")
    ):
        key = condition if variant == "declared" else f"{condition} ({variant})"
        groups[key].append(trace_id)
    return grouped_funnels(groups)


def unit_dispositions(*, trace_ids, unit_uid: str) -> dict[int, tuple[str, str]]:
    """trace id -> (disposition, reason code) of one unit in each of those traces (one query):
    the history's unit search shows what became of the unit in each trace."""
    return {
        trace_id: (disposition, reason)
        for trace_id, disposition, reason in TraceCandidate.objects.filter(
            trace_id__in=list(trace_ids), unit_uid=unit_uid
        ).values_list("trace_id", "disposition", "reason_code")
    }
