"""The API's trace routes: search the history, read, compare, verify and explain a trace, report
its outcome, label it into a task.

Routes parse, call the one selector or service the pages call, and shape the answer; role checks
happen in those selectors and services.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date, datetime
from typing import Any, Literal

from django.core.paginator import Paginator
from django.http import Http404
from django.urls import reverse
from ninja import Field, Query, Router, Schema, Status

from authority.ratelimits import rate_limit
from selection.api_fields import MAX_TEXT, Id, Text
from selection.engine.explain import trace_diff
from selection.traces import labelling, outcomes, selectors

router = Router(tags=["selection"])

TRACE_PAGE_SIZE = 50


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
    value: int | float | str = Field(description="the setting tried: tokens, places, a pull, floor or cap, a rule")
    disposition: str | None
    reason_code: str | None


class SuccessorOut(Schema):
    unit_id: str
    disposition: str | None
    reason_code: str | None


class DecisionOut(Schema):
    rule: str = Field(description="scope | supersession | class | stop rule | redundancy | budget | retrieval")
    reason_code: str | None
    detail: str
    units: list[SuccessorOut] = Field(description="the units the rule names: a superseded unit's successors")


class CounterfactualOut(Schema):
    kind: str
    title: str
    applicable: bool
    found: bool
    value: int | float | str | None
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
    decided: DecisionOut | None = Field(description="the rule that disposed of the unit; null: admitted")


def trace_url(pk: int) -> str:
    return reverse("api-1:trace", args=[pk])


def _summary(trace) -> dict:
    return {
        "id": trace.pk,
        "url": trace_url(trace.pk),
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


@router.get(
    "/traces",
    operation_id="selection_api_trace_list",
    response=TracePageOut,
    url_name="traces",
    summary="Search the trace history",
)
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


@router.get(
    "/traces/{trace_id}",
    operation_id="selection_api_trace_detail",
    response=TraceOut,
    url_name="trace",
    summary="One trace, in full",
)
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


@router.get(
    "/traces/{a}/diff/{b}",
    operation_id="selection_api_trace_diff_route",
    response=TraceDiffOut,
    url_name="trace-diff",
    summary="Compare two traces",
)
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


@router.post(
    "/traces/{trace_id}/verify",
    operation_id="selection_api_trace_verify",
    response=VerificationOut,
    url_name="trace-verify",
    summary="Verify a trace",
)
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
    operation_id="selection_api_trace_counterfactual",
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
        "decided": asdict(report.decided) if report.decided else None,
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
    operation_id="selection_api_trace_outcome",
    response={201: OutcomeOut},
    url_name="trace-outcomes",
    summary="Report how a bundle served the work",
    throttle=rate_limit("write"),
)
def trace_outcome(request, trace_id: Id, body: OutcomeIn):
    """An agent's feedback on a bundle it used: helped, partial, missed (lacked something),
    harmful, or failed (the answer failed on good evidence: E6)."""
    outcome = outcomes.outcome_report(
        user=request.auth, trace_id=trace_id, verdict=body.verdict, note=body.note, missing_units=body.missing_units
    )
    return Status(201, outcome_document(outcome))


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
    operation_id="selection_api_trace_label",
    response={201: LabelledTaskOut},
    url_name="trace-label",
    summary="Turn a trace into a labelled evaluation task",
    throttle=rate_limit("write"),
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
