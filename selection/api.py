"""The selection app's API routes: select, the trace explorer, corpora and evaluations.

Routes parse, call the one selector or service the pages call, and shape the answer; role checks
happen in those selectors and services. Authentication is given by the site (governance.api_site),
so this module imports nothing of the apps above it.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date, datetime
from typing import Any, Literal

from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.urls import reverse
from ninja import Field, File, Query, Router, Schema, Status
from ninja.files import UploadedFile

from selection import serving
from selection.api_fields import Id, Text
from selection.engine.explain import trace_diff
from selection.engine.routing.report import routing_summary
from selection.engine.routing.types import RoutingInputs
from selection.engine.types import SIGNAL_KINDS, WorkSignal
from selection.evaluation import jobs
from selection.evaluation.report import corpus_evaluations, corpus_for_name, evaluation_for_pk, evaluation_task_sets
from selection.models import Corpus, Evaluation, Job
from selection.traces import labelling, redaction, selectors

router = Router(tags=["selection"])

TRACE_PAGE_SIZE = 50
MAX_TEXT = 20_000
MAX_SIGNALS = 100
MAX_BUDGET = 100_000

SignalKind = Literal[SIGNAL_KINDS]  # type: ignore[valid-type]


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------


class SignalIn(Schema):
    id: Text = Field(min_length=1, max_length=200)
    kind: SignalKind  # type: ignore[valid-type]
    content: Text = Field(min_length=1, max_length=MAX_TEXT)


class WorkFrameIn(Schema):
    """A declared work frame; each field may cite the signals that licensed it."""

    objective: Text = Field("", max_length=MAX_TEXT)
    work_type: Text | None = Field(None, max_length=100)
    constraints: list[Text] = Field(default_factory=list, max_length=50)
    cites: dict[Text, list[Text]] = Field(default_factory=dict)


class RoutingIn(Schema):
    """Routing inputs: nothing is activated by guessing from wording."""

    task_category: Text | None = Field(None, max_length=100, description="mapped to a work type by the frame")
    paths: list[Text] = Field(
        default_factory=list, max_length=200, description="path scope: files planned, touched or inspected"
    )
    overlays: list[Text] = Field(default_factory=list, max_length=50, description="areas, profiles or rules by name")


class SelectIn(Schema):
    project: Text = Field(min_length=1, max_length=100)
    query: Text = Field("", max_length=MAX_TEXT, description="empty: the signals' contents are the query")
    signals: list[SignalIn] = Field(default_factory=list, max_length=MAX_SIGNALS)
    work_frame: WorkFrameIn | None = None
    budget_tokens: int | None = Field(None, ge=1, le=MAX_BUDGET, description="default: the site's budget")
    condition: Text = Field("C6", max_length=8)
    standpoint: datetime | None = Field(None, description="default: the corpus's standpoint")
    builder: Text = Field(
        "default",
        max_length=20,
        description="frame builder: declared, cue, similarity or model; default: declared when a work type "
        "is given, else the frame's configured builder",
    )
    routing: RoutingIn | None = None
    strict: bool = Field(False, description="no bundle unless routing is COMPLETE with no conflict (409)")
    no_local: bool = Field(False, description="leave out the caller's local overlay units")


class BundleItemOut(Schema):
    item_id: str
    sources: list[str]
    evidence_class: str
    project: str
    text: str
    contradicts: list[str]
    notes: list[str]
    tokens: int


class BundleOut(Schema):
    items: list[BundleItemOut]
    sources: list[str] = Field(description="every admitted unit, folded ones included, in bundle order")
    rendered: str
    tokens: int
    budget_tokens: int
    digest: str


class DiagnosticsOut(Schema):
    condition: str
    effective_condition: str
    condition_note: str
    frame_version: int
    candidates: int
    admitted: int
    rejected: int
    reasons: dict[str, int] = Field(description="candidates per reason code")


class DispositionOut(Schema):
    unit: str
    disposition: str
    reason: str


class ConflictOut(Schema):
    code: str
    units: list[str]


class RoutingOut(Schema):
    completeness: str
    work_type: str | None
    dispositions: list[DispositionOut]
    conflicts: list[ConflictOut]
    refused: bool
    refusal: str | None


class SelectOut(Schema):
    trace_id: int
    trace_url: str
    page_url: str
    bundle: BundleOut
    diagnostics: DiagnosticsOut
    routing: RoutingOut | None = None


class TraceFilterIn(Schema):
    project: Text = Field("", max_length=100)
    frame_version: int | None = Field(None, ge=0, le=2_147_483_647)
    since: date | None = None
    until: date | None = None
    task: Text = Field("", max_length=200)
    reason: Text = Field("", max_length=60)
    disposition: Text = Field("", max_length=30)
    unit: Text = Field("", max_length=200)
    source: Text = Field("", max_length=30)
    condition: Text = Field("", max_length=8)
    page: int = Field(1, ge=1, le=1_000_000)


class TraceSummaryOut(Schema):
    id: int
    url: str
    created_at: datetime
    project: str
    frame_version: int
    task: str | None
    condition: str
    source: str
    query: str
    budget_tokens: int
    bundle_tokens: int
    bundle_digest: str
    candidates: int
    admitted: list[str]


class TracePageOut(Schema):
    count: int
    page: int
    pages: int
    results: list[TraceSummaryOut]


class TraceOut(TraceSummaryOut):
    engine_version: str
    policy_version: str
    bundle: dict[str, Any] = Field(description="the ContextBundle document")
    trace: dict[str, Any] = Field(description="the ContextTrace document, every candidate included")


class CheckOut(Schema):
    name: str
    ok: bool
    expected: str
    actual: str


class VerificationOut(Schema):
    trace_id: int
    stored_ok: bool
    rerun_ok: bool
    rerun_error: str
    stored: list[CheckOut]
    rerun: list[CheckOut]


class TraceDiffOut(Schema):
    a: int
    b: int
    same_bundle: bool
    header: list[list[str]] = Field(description="[field, a, b] for each header field that differs")
    admitted: list[str] = Field(description="admitted in b, not in a")
    dropped: list[str] = Field(description="admitted in a, not in b")
    kept: list[str]
    reason_changes: list[dict[str, Any]]
    signal_changes: list[dict[str, Any]]


class ProbeOut(Schema):
    value: int
    disposition: str | None
    reason_code: str | None


class CounterfactualOut(Schema):
    kind: str
    title: str
    applicable: bool
    found: bool
    value: int | None
    setting: str
    outcome: ProbeOut | None
    below: ProbeOut | None
    gained: list[str]
    lost: list[str]
    runs: int
    note: str


class CounterfactualReportOut(Schema):
    trace_id: int
    unit_id: str
    disposition: str | None = Field(description="the unit in the stored trace; null: not a candidate")
    stage: str | None = Field(description="the pipeline stage that decided it")
    reason_code: str | None
    eligibility: list[str] = Field(description="each eligibility rule checked, with its detail")
    ledger_label: str
    baseline: ProbeOut
    reproduces: bool
    options: list[CounterfactualOut]


class CorpusOut(Schema):
    name: str
    description: str
    standpoint: datetime | None
    imported_at: datetime
    projects: list[str]
    evaluations_url: str


class EvaluationIn(Schema):
    conditions: list[Text] = Field(default_factory=list, max_length=16, description="empty: the whole ladder")


class EvaluationOut(Schema):
    id: int
    url: str
    page_url: str
    corpus: str
    created_at: datetime
    engine_version: str
    conditions: list[str]
    task_sets: dict[str, int] = Field(
        description="project slug -> the version of its task set the evaluation ran on (empty: run before versions)"
    )
    result: dict[str, Any] = Field(description="the `evaluate --json` document")


class EvaluationSummaryOut(Schema):
    id: int
    url: str
    created_at: datetime
    engine_version: str
    conditions: list[str]
    runs: int
    task_sets: dict[str, int] = Field(
        description="project slug -> the version of its task set the evaluation ran on (empty: run before versions)"
    )


class JobOut(Schema):
    id: int
    url: str
    page_url: str
    kind: str = Field(description="evaluation | import")
    status: str = Field(description="queued | running | finished | error")
    step: str
    done: int
    total: int
    corpus: str | None
    result: dict[str, Any] = Field(description="evaluation: its id; import: the corpus and its counts")
    result_url: str | None = Field(description="the evaluation (API), or the imported corpus's evaluations")
    error: str
    issues: list[str] = Field(description="every corpus issue, when an import was refused")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


# --------------------------------------------------------------------------------------------
# Select
# --------------------------------------------------------------------------------------------


def _trace_url(pk: int) -> str:
    return reverse("api-1:trace", args=[pk])


@router.post("/select", response=SelectOut, url_name="select", summary="Select a context bundle")
def select(request, body: SelectIn):
    """Build the bundle for a request under the project's promoted frame; the trace is stored
    (source "api") and searchable like any other."""
    frame = body.work_frame or WorkFrameIn()
    routing = body.routing or RoutingIn()
    selection = serving.select_for_user(
        user=request.auth,
        project_slug=body.project,
        query=body.query,
        signals=tuple(WorkSignal(id=s.id, kind=s.kind, content=s.content) for s in body.signals),
        objective=frame.objective,
        work_type=frame.work_type,
        constraints=tuple(frame.constraints),
        cites=frame.cites,
        budget_tokens=body.budget_tokens,
        condition=body.condition,
        standpoint=body.standpoint,
        builder=body.builder,
        routing=RoutingInputs(
            task_category=routing.task_category or None,
            paths=tuple(routing.paths),
            overlays=tuple(routing.overlays),
            strict=body.strict,
            no_local=body.no_local,
        ),
    )
    return select_document(selection, user=request.auth)


def select_document(selection, *, user) -> dict:
    """The answer to a selection (API and MCP): the bundle, the trace's URLs, the diagnostics.

    The bundle is redacted for `user` like every stored trace (selection.redaction)."""
    trace = selection.trace
    result, _ = redaction.redacted_result(selection.result, readable=redaction.readable_slugs(user))
    reasons: dict[str, int] = {}
    for c in result.trace.candidates:
        reasons[c.reason_code] = reasons.get(c.reason_code, 0) + 1
    admitted = len(result.trace.admitted_unit_ids())
    bundle = result.bundle
    return {
        "trace_id": trace.pk,
        "trace_url": _trace_url(trace.pk),
        "page_url": reverse("trace-detail", args=[trace.pk]),
        "bundle": {
            "items": [asdict(item) for item in bundle.items],
            "sources": list(bundle.unit_ids()),
            "rendered": bundle.rendered,
            "tokens": bundle.tokens,
            "budget_tokens": bundle.budget_tokens,
            "digest": bundle.digest,
        },
        "diagnostics": {
            "condition": result.trace.condition,
            "effective_condition": result.trace.effective_condition,
            "condition_note": result.trace.condition_note,
            "frame_version": trace.frame_version,
            "candidates": len(result.trace.candidates),
            "admitted": admitted,
            "rejected": len(result.trace.candidates) - admitted,
            "reasons": dict(sorted(reasons.items())),
        },
        "routing": _routing_document(result.trace.routing),
    }


def _routing_document(report) -> dict | None:
    if report is None:
        return None
    summary = routing_summary(report)
    keys = ("completeness", "work_type", "dispositions", "conflicts", "refused", "refusal")
    return {key: summary[key] for key in keys}


# --------------------------------------------------------------------------------------------
# Traces
# --------------------------------------------------------------------------------------------


def _summary(trace) -> dict:
    return {
        "id": trace.pk,
        "url": _trace_url(trace.pk),
        "created_at": trace.created_at,
        "project": trace.project.slug,
        "frame_version": trace.frame_version,
        "task": trace.task.uid if trace.task_id else None,
        "condition": trace.condition,
        "source": trace.source,
        "query": trace.query,
        "budget_tokens": trace.budget_tokens,
        "bundle_tokens": trace.bundle_tokens,
        "bundle_digest": trace.bundle_digest,
        "candidates": getattr(trace, "candidate_count", None) or 0,
        "admitted": list(trace.admitted),
    }


@router.get("/traces", response=TracePageOut, url_name="traces", summary="Search the trace history")
def trace_list(request, filters: Query[TraceFilterIn]):
    """The history page's search: the same filters, newest first, 50 a page."""
    criteria = selectors.TraceFilters(**filters.dict(exclude={"page"}))
    paginator = Paginator(selectors.trace_search(user=request.auth, filters=criteria), TRACE_PAGE_SIZE)
    page = paginator.get_page(filters.page)
    return {
        "count": paginator.count,
        "page": page.number,
        "pages": paginator.num_pages,
        "results": [_summary(t) for t in page],
    }


@router.get("/traces/{trace_id}", response=TraceOut, url_name="trace", summary="One trace, in full")
def trace_detail(request, trace_id: Id):
    trace, _ = selectors.readable_trace(user=request.auth, pk=trace_id)
    return trace_document(trace, user=request.auth)


def trace_document(trace, *, user) -> dict:
    """One stored trace in full (API and MCP), as `user` may see it (selectors.trace_read)."""
    result, _ = selectors.trace_read(trace, user=user)
    doc = _summary(trace)
    doc["candidates"] = len(result.trace.candidates)
    doc.update(
        engine_version=trace.engine_version,
        policy_version=trace.policy_version,
        bundle=result.bundle.as_dict(),
        trace=result.trace.as_dict(),
    )
    return doc


@router.get("/traces/{a}/diff/{b}", response=TraceDiffOut, url_name="trace-diff", summary="Compare two traces")
def trace_diff_route(request, a: Id, b: Id):
    trace_a, _ = selectors.readable_trace(user=request.auth, pk=a)
    trace_b, _ = selectors.readable_trace(user=request.auth, pk=b)
    (result_a, _), (result_b, _) = (selectors.trace_read(t, user=request.auth) for t in (trace_a, trace_b))
    diff = trace_diff(result_a.trace, result_b.trace)
    return {
        "a": trace_a.pk,
        "b": trace_b.pk,
        "same_bundle": diff.same_bundle,
        "header": [list(row) for row in diff.header],
        "admitted": list(diff.admitted),
        "dropped": list(diff.dropped),
        "kept": list(diff.kept),
        "reason_changes": [asdict(c) for c in diff.reason_changes],
        "signal_changes": [asdict(c) for c in diff.signal_changes],
    }


@router.post("/traces/{trace_id}/verify", response=VerificationOut, url_name="trace-verify", summary="Verify a trace")
def trace_verify(request, trace_id: Id):
    """Recompute the digest from the stored text and by re-running the engine; writes nothing."""
    trace, _ = selectors.readable_trace(user=request.auth, pk=trace_id)
    verification = selectors.trace_verify(trace)
    return {
        "trace_id": trace.pk,
        "stored_ok": verification.stored_ok,
        "rerun_ok": verification.rerun_ok,
        "rerun_error": verification.rerun_error,
        "stored": [asdict(c) for c in verification.stored],
        "rerun": [asdict(c) for c in verification.rerun],
    }


@router.get(
    "/traces/{trace_id}/counterfactual/{unit}",
    response=CounterfactualReportOut,
    url_name="trace-counterfactual",
    summary="What smallest change would have admitted a unit",
)
def trace_counterfactual(request, trace_id: Id, unit: Text):
    trace, _ = selectors.readable_trace(user=request.auth, pk=trace_id)
    return counterfactual_document(trace, unit, user=request.auth)


def counterfactual_document(trace, unit: str, *, user) -> dict:
    """Why a unit was or was not admitted, and the smallest changes that would admit it."""
    explained = selectors.trace_explained(trace, user=user)
    record = explained.result.trace.candidate(unit)
    if record is None and unit not in explained.ledger:
        raise Http404(f"{unit} is neither a candidate of trace #{trace.pk} nor in its ledger")
    report = selectors.trace_counterfactual(trace, unit)
    return {
        "trace_id": trace.pk,
        "unit_id": unit,
        "disposition": record.disposition if record else None,
        "stage": record.stage if record else None,
        "reason_code": record.reason_code if record else None,
        "eligibility": [f"{e.rule}: {e.detail}" for e in record.eligibility] if record else [],
        "ledger_label": explained.ledger.get(unit, ""),
        "baseline": asdict(report.baseline),
        "reproduces": report.reproduces,
        "options": [asdict(o) for o in report.options],
    }


class OutcomeIn(Schema):
    verdict: Literal["helped", "partial", "missed", "harmful", "failed"] = Field(
        description="failed: the answer failed although the evidence was present (attributed E6)"
    )
    note: Text = Field("", max_length=MAX_TEXT)
    missing_units: list[Text] = Field(default_factory=list, max_length=200, description="unit ids the work lacked")


class OutcomeOut(Schema):
    id: int
    trace_id: int
    verdict: str
    note: str
    missing_units: list[str]
    reporter: str
    created_at: datetime


def outcome_document(outcome) -> dict:
    return {
        "id": outcome.pk,
        "trace_id": outcome.trace_id,
        "verdict": outcome.verdict,
        "note": outcome.note,
        "missing_units": list(outcome.missing_units),
        "reporter": outcome.reporter.username,
        "created_at": outcome.created_at,
    }


@router.post(
    "/traces/{trace_id}/outcomes",
    response={201: OutcomeOut},
    url_name="trace-outcomes",
    summary="Report how a bundle served the work",
)
def trace_outcome(request, trace_id: Id, body: OutcomeIn):
    """An agent's feedback on a bundle it used: helped, partial, missed (lacked something),
    harmful, or failed (the answer failed on good evidence: E6)."""
    outcome = serving.outcome_report(
        user=request.auth, trace_id=trace_id, verdict=body.verdict, note=body.note, missing_units=body.missing_units
    )
    return Status(201, outcome_document(outcome))


# --------------------------------------------------------------------------------------------
# Corpora and evaluations
# --------------------------------------------------------------------------------------------


def _corpus(name: str) -> Corpus:
    try:
        return corpus_for_name(name=name)
    except Corpus.DoesNotExist:
        raise Http404(f'no corpus "{name}"') from None


@router.get("/corpora", response=list[CorpusOut], url_name="corpora", summary="The corpora you may read")
def corpus_list(request):
    return [
        {
            "name": corpus.name,
            "description": corpus.description,
            "standpoint": corpus.standpoint,
            "imported_at": corpus.imported_at,
            "projects": [p.slug for p in corpus.projects.all()],
            "evaluations_url": reverse("evaluation-list", args=[corpus.name]),
        }
        for corpus in selectors.readable_corpora(user=request.auth)
    ]


def _job(job: Job) -> dict:
    result_url = None
    if job.status == "finished" and job.result.get("evaluation"):
        result_url = reverse("api-1:evaluation", args=[job.result["evaluation"]])
    elif job.status == "finished" and job.result.get("corpus"):
        result_url = reverse("api-1:corpus-evaluations", args=[job.result["corpus"]])
    return {
        "id": job.pk,
        "url": reverse("api-1:job", args=[job.pk]),
        "page_url": reverse("job-detail", args=[job.pk]),
        "kind": job.kind,
        "status": job.status,
        "step": job.step,
        "done": job.done,
        "total": job.total,
        "corpus": job.corpus.name if job.corpus_id else None,
        "result": job.result,
        "result_url": result_url,
        "error": job.error,
        "issues": list(job.issues),
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }


def _accepted(response: HttpResponse, job: Job) -> Status:
    doc = _job(job)
    response["Location"] = doc["url"]
    return Status(202, doc)


@router.post("/corpora", response={202: JobOut}, url_name="corpus-import", summary="Import a corpus archive")
def corpus_upload(request, response: HttpResponse, archive: File[UploadedFile]):
    """A .tar.gz or .zip of a corpus in the interchange format (superusers). It is checked in full
    now (422 lists every issue, 413 past a limit); the import then runs on a worker: follow the job."""
    return _accepted(response, jobs.corpus_import_enqueue(user=request.auth, upload=archive))


@router.get(
    "/corpora/{name}/evaluations",
    response=list[EvaluationSummaryOut],
    url_name="corpus-evaluations",
    summary="A corpus's evaluations",
)
def evaluation_list(request, name: Text):
    corpus = _corpus(name)
    selectors.readable_corpus(user=request.auth, corpus=corpus)
    return [
        {
            "id": e.pk,
            "url": reverse("api-1:evaluation", args=[e.pk]),
            "created_at": e.created_at,
            "engine_version": e.engine_version,
            "conditions": list(e.conditions),
            "runs": e.run_count,
            "task_sets": evaluation_task_sets(e),
        }
        for e in corpus_evaluations(corpus=corpus)
    ]


@router.post(
    "/corpora/{name}/evaluations",
    response={202: JobOut},
    url_name="evaluation-create",
    summary="Run an evaluation of a corpus",
)
def evaluation_create(request, response: HttpResponse, name: Text, body: EvaluationIn):
    """Queued for a worker (a lead of one of the corpus's projects); follow the job to its result."""
    corpus = _corpus(name)
    return _accepted(response, jobs.evaluation_enqueue(corpus=corpus, conditions=body.conditions, actor=request.auth))


@router.get("/jobs/{job_id}", response=JobOut, url_name="job", summary="An evaluation or import job")
def job_detail(request, job_id: Id):
    """Progress while it runs; then the result's URL, or the error with every issue."""
    return _job(jobs.readable_job(user=request.auth, pk=job_id))


@router.get("/evaluations/{evaluation_id}", response=EvaluationOut, url_name="evaluation", summary="One evaluation")
def evaluation_detail(request, evaluation_id: Id):
    try:
        evaluation = evaluation_for_pk(pk=evaluation_id)
    except Evaluation.DoesNotExist:
        raise Http404(f"no evaluation {evaluation_id}") from None
    selectors.readable_corpus(user=request.auth, corpus=evaluation.corpus)
    return _evaluation(evaluation, evaluation.corpus)


def _evaluation(evaluation: Evaluation, corpus: Corpus) -> dict:
    return {
        "id": evaluation.pk,
        "url": reverse("api-1:evaluation", args=[evaluation.pk]),
        "page_url": reverse("evaluation-detail", args=[evaluation.pk]),
        "corpus": corpus.name,
        "created_at": evaluation.created_at,
        "engine_version": evaluation.engine_version,
        "conditions": list(evaluation.conditions),
        "task_sets": evaluation.result.get("task_sets", {}),
        "result": evaluation.result,
    }


# --------------------------------------------------------------------------------------------
# Ledgers from traces
# --------------------------------------------------------------------------------------------


class TraceLabelIn(Schema):
    uid: Text = Field("", max_length=200, description="the new task's id (default trace-N)")
    labels: dict[Text, Literal["MUST", "SHOULD", "OPTIONAL", "DISTRACTOR", "HARMFUL"]] = Field(
        description="unit id (a candidate of the trace) -> its label"
    )


class LabelledTaskOut(Schema):
    task: str
    project: str
    trace_id: int
    labelled_by: str
    task_set_version: int
    labels: dict[str, str]


@router.post(
    "/traces/{trace_id}/task",
    response={201: LabelledTaskOut},
    url_name="trace-label",
    summary="Turn a trace into a labelled evaluation task",
)
def trace_label(request, trace_id: Id, body: TraceLabelIn):
    """The trace's request becomes a task of its project with `labels` as its ledger; the project's
    task set gets a new version, which later backtests name."""
    trace, _caps = selectors.readable_trace(user=request.auth, pk=trace_id)
    made = labelling.trace_label(trace=trace, user=request.auth, labels=dict(body.labels), uid=body.uid)
    return Status(
        201,
        {
            "task": made.task.uid,
            "project": trace.project.slug,
            "trace_id": trace.pk,
            "labelled_by": request.auth.username,
            "task_set_version": made.version.number,
            "labels": dict(body.labels),
        },
    )
