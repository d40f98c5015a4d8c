"""Reads for the backtest pages: progress counts, per-task rows and the chart, in fixed queries."""

from __future__ import annotations

from dataclasses import dataclass

from django.shortcuts import get_object_or_404
from django.urls import reverse

from governance.selectors import backtest_approval, backtest_decision
from selection import origins
from selection.origins import TraceOrigin

from . import gates as gate_rules
from .models import Backtest, BacktestDecision, BacktestStatus, ReplaySide, TaskReplay


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    status: str

    @property
    def finished(self) -> bool:
        return self.status in (BacktestStatus.FINISHED, BacktestStatus.ERROR)

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else 100


@dataclass(frozen=True)
class MetricCell:
    metric: str
    baseline: float | None
    candidate: float | None

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.candidate is None:
            return None
        return self.candidate - self.baseline


@dataclass(frozen=True)
class TaskRow:
    task_id: int
    task: str
    baseline_trace: int | None
    candidate_trace: int | None
    cells: tuple[MetricCell, ...]


def backtest_by_id(*, backtest_id: int) -> Backtest:
    return get_object_or_404(
        Backtest.objects.select_related(
            "proposal",
            "proposal__project",
            "proposal__project__corpus",
            "baseline_version",
            "candidate_version",
            "requested_by",
            "decision",
            "approval",
            "approval__reviewer",
        ),
        pk=backtest_id,
    )


def backtest_progress(*, backtest: Backtest) -> Progress:
    """Replays written so far out of two per task (baseline and candidate)."""
    done = TaskReplay.objects.filter(backtest=backtest).count()
    return Progress(done=done, total=2 * len(backtest.task_ids), status=backtest.status)


def page_metrics(backtest: Backtest) -> tuple[str, ...]:
    """The primary metric, then each gate metric once: the columns and the chart's panels."""
    return gate_rules.gate_metrics(backtest.gates or {})


def task_rows(*, backtest: Backtest) -> list[TaskRow]:
    """One row per task in replay order, with both traces and the gate metrics (one query)."""
    metrics = page_metrics(backtest)
    found: dict[tuple[int, str], tuple[int, dict]] = {}
    uids: dict[int, str] = {}
    for task_id, uid, side, trace_id, values in TaskReplay.objects.filter(backtest=backtest).values_list(
        "task_id", "task__uid", "side", "trace_id", "metrics"
    ):
        found[(task_id, side)] = (trace_id, values)
        uids[task_id] = uid
    rows = []
    for task_id in backtest.task_ids:
        base = found.get((task_id, ReplaySide.BASELINE))
        cand = found.get((task_id, ReplaySide.CANDIDATE))
        if base is None and cand is None:
            continue
        rows.append(
            TaskRow(
                task_id=task_id,
                task=uids[task_id],
                baseline_trace=base[0] if base else None,
                candidate_trace=cand[0] if cand else None,
                cells=tuple(
                    MetricCell(
                        m,
                        base[1].get(m) if base else None,
                        cand[1].get(m) if cand else None,
                    )
                    for m in metrics
                ),
            )
        )
    return rows


def decision_chart(*, decision: BacktestDecision | None, metrics: tuple[str, ...]) -> dict | None:
    """Per-task deltas of each metric, the data of the page's plotly chart."""
    if decision is None or not decision.per_task_deltas:
        return None
    tasks = [row["task"] for row in decision.per_task_deltas]
    series = [{"metric": m, "deltas": [row["delta"].get(m) for row in decision.per_task_deltas]} for m in metrics]
    moved = [s for s in series if any(d is not None and abs(d) > gate_rules.EPSILON for d in s["deltas"])]
    # the page draws only the metrics that moved, the fractions all on one y-scale of ± the
    # largest change; token counts are not fractions, so each gets its own scale and the page says so
    shared = [s for s in moved if "token" not in s["metric"]]
    return {
        "tasks": tasks,
        "series": series,
        "changed": [s["metric"] for s in moved],
        "own_scale": [s["metric"] for s in moved if s not in shared],
        "unchanged": [s["metric"] for s in series if s not in moved],
        "largest": max((abs(d) for s in shared for d in s["deltas"] if d is not None), default=0.0),
    }


def backtest_outcome(backtest: Backtest):
    """(decision, approval) of a backtest, either None."""
    return backtest_decision(backtest), backtest_approval(backtest)


def trace_origin(trace) -> TraceOrigin | None:
    """The backtest that replayed this trace, for the trace page's link back (registered with
    selection.origins at start-up)."""
    replay = (
        TaskReplay.objects.filter(trace_id=trace.pk).select_related("backtest__proposal").order_by("-pk").first()
    )
    if replay is None:
        return None
    backtest = replay.backtest
    return TraceOrigin(
        f"backtest #{backtest.pk} of proposal #{backtest.proposal_id} ({replay.side} side)",
        reverse("backtest-detail", args=[backtest.pk]),
    )


origins.register_finder(trace_origin)
