"""Reads for the backtest pages (progress counts, per-task rows, the chart, the ablation, the shadow
replay, in fixed queries) and the projects a frame may scope."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.shortcuts import get_object_or_404
from django.urls import reverse

from rules import gate_verdict as gate_rules
from selection.engine.explain import LossFunnel
from selection.models import Project, Task
from selection.traces import origins
from selection.traces.origins import TraceOrigin
from selection.traces.selectors import grouped_funnels

from .models import (
    AblationReplay,
    Backtest,
    BacktestDecision,
    BacktestStatus,
    ReplaySide,
    ShadowReplay,
    TaskReplay,
)
from .review.selectors import backtest_decision, review_tally


def backtest_funnels(backtest: Backtest) -> dict[str, LossFunnel]:
    """Side (baseline, candidate) -> the loss funnel summed over the backtest's task replays."""
    groups: dict[str, list[int]] = defaultdict(list)
    for side, trace_id in (
        TaskReplay.objects.filter(backtest=backtest).order_by("side", "task_id").values_list("side", "trace_id")
    ):
        groups[side].append(trace_id)
    return grouped_funnels({side: groups.get(side, []) for side in ("baseline", "candidate")})


# --- the backtest pages ------------------------------------------------------------------------


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
            "task_set_version",
            "decision",
        ).prefetch_related("approvals__reviewer"),
        pk=backtest_id,
    )


def backtest_progress(*, backtest: Backtest) -> Progress:
    """Replays written so far out of one per task and side (baseline, candidate, each ablation
    variant) and one per recorded selection of the shadow replay."""
    variants = len((backtest.ablation or {}).get("variants") or [])
    shadows = len((backtest.shadow or {}).get("traces") or [])
    done = (
        TaskReplay.objects.filter(backtest=backtest).count()
        + (AblationReplay.objects.filter(backtest=backtest).count() if variants else 0)
        + (ShadowReplay.objects.filter(backtest=backtest).count() if shadows else 0)
    )
    return Progress(done=done, total=(2 + variants) * len(backtest.task_ids) + shadows, status=backtest.status)


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
    """(decision or None, the review tally against the project's approval policy)."""
    return backtest_decision(backtest), review_tally(backtest)


def trace_origin(trace) -> TraceOrigin | None:
    """The backtest that replayed this trace, for the trace page's link back (registered with
    selection.traces.origins at start-up); the first one, when later backtests reused it (backtest.replay.reuse)."""
    replay = (
        TaskReplay.objects.filter(trace_id=trace.pk).select_related("backtest__proposal").order_by("pk").first()
    )
    if replay is None:
        return None
    backtest = replay.backtest
    return TraceOrigin(
        f"backtest #{backtest.pk} of proposal #{backtest.proposal_id} ({replay.side} side)",
        reverse("backtest-detail", args=[backtest.pk]),
    )


origins.register_finder(trace_origin)


# --- the ablation of a proposal ------------------------------------------------------------------


@dataclass(frozen=True)
class AblationCell:
    metric: str
    alone: float | None
    marginal: float | None


@dataclass(frozen=True)
class AblationRow:
    part: str
    cells: tuple[AblationCell, ...]
    alone_passed: bool
    alone_failed: tuple[str, ...]  # the gates the part alone fails, as "gate metric"
    flagged: bool
    why: tuple[str, ...]
    hurt_tasks: tuple[str, ...]


@dataclass(frozen=True)
class Ablation:
    """What the page shows of a backtest's ablation: a row per part, or the note saying why none."""

    rows: tuple[AblationRow, ...]
    metrics: tuple[str, ...]
    note: str

    @property
    def flagged(self) -> tuple[AblationRow, ...]:
        return tuple(r for r in self.rows if r.flagged)


def backtest_ablation(*, backtest: Backtest | None, decision: BacktestDecision | None) -> Ablation | None:
    """The ablation table of a finished backtest (None when it ablated nothing and says nothing)."""
    if backtest is None:
        return None
    note = (backtest.ablation or {}).get("note", "")
    effects = decision.ablation if decision is not None else []
    if not effects and not note:
        return None
    metrics = tuple(dict.fromkeys((*page_metrics(backtest), "tokens")))
    rows = tuple(
        AblationRow(
            part=e["part"],
            cells=tuple(AblationCell(m, e["alone"].get(m), e["marginal"].get(m)) for m in metrics),
            alone_passed=bool(e["alone_passed"]),
            alone_failed=tuple(f"{g['gate']} {g['metric']}" for g in e.get("alone_gates", ()) if not g["passed"]),
            flagged=bool(e["flagged"]),
            why=tuple(e.get("why", ())),
            hurt_tasks=tuple(e.get("hurt_tasks", ())),
        )
        for e in effects
    )
    return Ablation(rows=rows, metrics=metrics, note=note)


# --- shadow replay of recorded selections --------------------------------------------------------


@dataclass(frozen=True)
class ShadowRow:
    selection: int
    source: str
    query: str
    created_at: object
    changed: bool | None
    reproduced: bool | None
    entered: tuple[str, ...]
    left: tuple[str, ...]
    baseline_tokens: int | None
    candidate_tokens: int | None
    baseline_leakage: float | None
    candidate_leakage: float | None
    error: str
    selection_url: str
    diff_url: str | None


@dataclass(frozen=True)
class Shadow:
    """A backtest's shadow replay: one row per recorded selection, newest first."""

    requested: int
    rows: tuple[ShadowRow, ...]
    expected: int

    @property
    def replayed(self) -> int:
        return sum(1 for r in self.rows if not r.error)

    @property
    def changed(self) -> int:
        return sum(1 for r in self.rows if r.changed)

    @property
    def errors(self) -> int:
        return sum(1 for r in self.rows if r.error)

    @property
    def sentence(self) -> str:
        if not self.expected:
            return f"no recorded selection to replay (asked for the last {self.requested})"
        text = f"would change {self.changed} of {self.replayed} recent bundles"
        if self.errors:
            text += f" ({self.errors} could not be replayed)"
        return text


def backtest_shadow(*, backtest: Backtest | None) -> Shadow | None:
    """The shadow replay of a backtest (None when it asked for none), in its selections' order."""
    if backtest is None:
        return None
    plan = backtest.shadow or {}
    if not plan.get("requested"):
        return None
    order = {trace_id: i for i, trace_id in enumerate(plan.get("traces", []))}
    diff = reverse("trace-diff")
    rows = []
    for r in ShadowReplay.objects.filter(backtest=backtest).select_related("selection"):
        rows.append(
            ShadowRow(
                selection=r.selection_id,
                source=r.selection.source,
                query=r.selection.query,
                created_at=r.selection.created_at,
                changed=r.changed,
                reproduced=r.reproduced,
                entered=tuple(r.entered),
                left=tuple(r.left),
                baseline_tokens=r.baseline_tokens,
                candidate_tokens=r.candidate_tokens,
                baseline_leakage=r.baseline_leakage,
                candidate_leakage=r.candidate_leakage,
                error=r.error,
                selection_url=reverse("trace-detail", args=[r.selection_id]),
                diff_url=f"{diff}?a={r.baseline_trace_id}&b={r.candidate_trace_id}"
                if r.baseline_trace_id and r.candidate_trace_id
                else None,
            )
        )
    rows.sort(key=lambda r: order.get(r.selection, len(order)))
    return Shadow(requested=int(plan["requested"]), rows=tuple(rows), expected=len(order))


def shadow_document(backtest: Backtest) -> dict | None:
    """The shadow replay: how many recent bundles would change, and each selection's change."""
    shadow = backtest_shadow(backtest=backtest)
    if shadow is None:
        return None
    return {
        "requested": shadow.requested,
        "replayed": shadow.replayed,
        "changed": shadow.changed,
        "errors": shadow.errors,
        "summary": shadow.sentence,
        "selections": [
            {
                "trace": row.selection,
                "source": row.source,
                "query": row.query,
                "changed": row.changed,
                "reproduced": row.reproduced,
                "entered": list(row.entered),
                "left": list(row.left),
                "tokens": {"baseline": row.baseline_tokens, "candidate": row.candidate_tokens},
                "leakage": {"baseline": row.baseline_leakage, "candidate": row.candidate_leakage},
                "diff": row.diff_url,
                "error": row.error,
            }
            for row in shadow.rows
        ],
    }


def proposal_backtest(*, proposal, backtest_id: int) -> Backtest:
    return get_object_or_404(Backtest, pk=backtest_id, proposal=proposal)


def backtest_task_id(*, backtest: Backtest, uid: str) -> int:
    """The id of the task `uid` among those `backtest` replayed (404 when it replayed none such)."""
    return get_object_or_404(Task.objects.filter(pk__in=backtest.task_ids), uid=uid).pk


def declared_projects(*, project: Project) -> list[str]:
    """Slugs a frame of `project` may scope: the projects its corpus declares."""
    return list(
        Project.objects.filter(corpus_id=project.corpus_id)
        .order_by("position", "slug")
        .values_list("slug", flat=True)
    )
