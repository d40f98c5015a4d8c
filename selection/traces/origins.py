"""Where a stored trace came from (the evaluation or backtest that wrote it), for a link back.

Selection knows its own evaluations; an app above it that writes traces (backtest) registers a
finder at start-up, so this module never imports upward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.urls import reverse

from selection.models import EvaluationRun, Trace


@dataclass(frozen=True)
class TraceOrigin:
    label: str  # "evaluation 3 (task t1, condition C6)"
    url: str


_finders: list[Callable[[Trace], TraceOrigin | None]] = []


def register_finder(finder: Callable[[Trace], TraceOrigin | None]) -> None:
    if finder not in _finders:
        _finders.append(finder)


def _evaluation(trace: Trace) -> TraceOrigin | None:
    run = EvaluationRun.objects.filter(trace_id=trace.pk).select_related("task").first()
    if run is None:
        return None
    return TraceOrigin(
        f"evaluation {run.evaluation_id} (task {run.task.uid}, condition {run.condition}, {run.variant})",
        reverse("evaluation-detail", args=[run.evaluation_id]),
    )


def trace_origins(trace: Trace) -> list[TraceOrigin]:
    """Every evaluation or backtest that produced this trace (a replay writes one trace and may
    serve more than one backtest)."""
    found = [_evaluation(trace)] + [finder(trace) for finder in _finders]
    return [o for o in found if o is not None]


def comparable_traces(trace: Trace, *, limit: int = 40) -> list[Trace]:
    """Traces that answer the same task (or, without one, the same query) in the same project:
    other frame versions first, newest first; what the "diff with" picker offers."""
    others = Trace.objects.filter(project_id=trace.project_id).exclude(pk=trace.pk)
    others = others.filter(task_id=trace.task_id) if trace.task_id else others.filter(query=trace.query)
    rows = list(others.only("pk", "frame_version", "condition", "source", "created_at").order_by("-created_at")[:limit])
    return sorted(rows, key=lambda t: (t.frame_version == trace.frame_version, -t.created_at.timestamp()))
