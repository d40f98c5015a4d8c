"""The API's select route: a request parsed, served by serve.select_for_user, the answer shaped.

Routes parse, call the one service the pages and commands call, and shape the answer; role checks
happen in that service. Authentication is given by the site, so this module imports nothing of
the apps above it.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Literal

from django.urls import reverse
from ninja import Field, Router, Schema

from authority.ratelimits import rate_limit
from selection.api_fields import MAX_TEXT, Text
from selection.engine.routing.report import routing_summary
from selection.engine.routing.types import RoutingInputs
from selection.engine.types import SIGNAL_KINDS, WorkSignal
from selection.serving.serve import select_for_user
from selection.traces import redaction
from selection.traces.api import trace_url

router = Router(tags=["selection"])

MAX_SIGNALS = 100
MAX_BUDGET = 100_000

SignalKind = Literal[SIGNAL_KINDS]  # type: ignore[valid-type]


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


@router.post(
    "/select",
    operation_id="selection_api_select",
    response=SelectOut,
    url_name="select",
    summary="Select a context bundle",
    throttle=rate_limit("select"),
)
def select(request, body: SelectIn):
    """Build the bundle for a request under the project's promoted frame; the trace is stored
    (source "api") and searchable like any other."""
    frame = body.work_frame or WorkFrameIn()
    routing = body.routing or RoutingIn()
    selection = select_for_user(
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

    The bundle is redacted for `user` like every stored trace (selection.traces.redaction)."""
    trace = selection.trace
    result, _ = redaction.redacted_result(selection.result, readable=redaction.readable_slugs(user))
    reasons: dict[str, int] = {}
    for c in result.trace.candidates:
        reasons[c.reason_code] = reasons.get(c.reason_code, 0) + 1
    admitted = len(result.trace.admitted_unit_ids())
    bundle = result.bundle
    return {
        "trace_id": trace.pk,
        "trace_url": trace_url(trace.pk),
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
