"""Health reads: a project's readings over time (page, API) and the projects failing now (inbox).

Reading needs any role in the project (authority.access.access_read), checked here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from authority import access
from rules.gate_verdict import PRIMARY_GATE, fmt
from selection.models import Project

from ..models import FrameHealth
from . import chart

HISTORY = 60  # readings the page charts and lists (two months of daily readings)
ABSOLUTE = ("max", "min")


def health_history(*, project: Project, user, limit: int = HISTORY) -> list[FrameHealth]:
    """The project's latest `limit` readings, oldest first."""
    access.access_read(user, project)
    rows = list(
        FrameHealth.objects.filter(project=project)
        .select_related("frame_version")
        .defer("per_task")
        .order_by("-created_at", "-id")[:limit]
    )
    rows.reverse()
    return rows


@dataclass(frozen=True)
class MetricChart:
    metric: str
    gates: str  # the gates on it, in words: "max_drop 0.02 · max 0"
    svg: str
    latest: float
    passed: bool  # the latest reading passes every gate on this metric


@dataclass(frozen=True)
class HealthPanel:
    rows: list[FrameHealth]  # oldest first
    charts: list[MetricChart] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)  # the table's metric columns
    alert: HealthAlert | None = None
    recovered: FrameHealth | None = None  # the latest reading, when it recovered from an alert
    can_request: bool = False

    @property
    def latest(self) -> FrameHealth | None:
        return self.rows[-1] if self.rows else None

    @property
    def table(self) -> list[dict]:
        """Newest first: each reading with its metric values and failing gates."""
        out = []
        for row in reversed(self.rows):
            failing = {g["metric"] for g in row.gate_results if not g["passed"]}
            out.append(
                {
                    "row": row,
                    "cells": [(m, fmt(row.means.get(m, 0.0)), m not in failing) for m in self.metrics],
                    "failing": [g for g in row.gate_results if not g["passed"]],
                }
            )
        return out


def _gate_words(gates: list[dict]) -> str:
    words = []
    for g in gates:
        if g["gate"] == PRIMARY_GATE:
            words.append("must not fall below its first reading")
        else:
            words.append(f'{g["gate"]} {g["limit"]:g}')
    return " · ".join(words)


def _label(row: FrameHealth) -> str:
    task_set = f"task set v{row.task_set_version}" if row.task_set_version else "task set as imported"
    grew = f", memory +{row.memory_growth}" if row.memory_growth is not None else ""
    return f"frame v{row.frame_version.number}, {task_set}, corpus rev {row.corpus_revision}{grew}, {row.trigger}"


def panel_of(rows: list[FrameHealth], *, project: Project) -> HealthPanel:
    """Charts of the primary and each gate metric over `rows`, and the alert if the latest fails."""
    if not rows:
        return HealthPanel(rows=[])
    latest = rows[-1]
    metrics = [latest.primary_metric]
    for g in latest.gate_results:
        if g["metric"] not in metrics:
            metrics.append(g["metric"])
    charts = []
    for metric in metrics:
        points = []
        for row in rows:
            if metric not in row.means:
                continue
            on_metric = [g for g in row.gate_results if g["metric"] == metric]
            points.append(
                chart.Point(
                    at=row.created_at,
                    value=float(row.means[metric]),
                    passed=all(g["passed"] for g in on_metric),
                    label=_label(row),
                )
            )
        gates_now = [g for g in latest.gate_results if g["metric"] == metric]
        lines = [
            chart.Line(float(g["limit"]), f'{g["gate"]} {g["limit"]:g}') for g in gates_now if g["gate"] in ABSOLUTE
        ]
        failing = sum(1 for p in points if not p.passed)
        description = (
            f"{metric} of {project.slug}'s promoted frame over {len(points)} readings from "
            f"{points[0].at:%Y-%m-%d} to {points[-1].at:%Y-%m-%d}: latest {fmt(points[-1].value)}, "
            f"lowest {fmt(min(p.value for p in points))}, highest {fmt(max(p.value for p in points))}; "
            f"{failing} of them fail a gate on it. The table below lists every reading."
        )
        charts.append(
            MetricChart(
                metric=metric,
                gates=_gate_words(gates_now),
                svg=chart.line_chart(
                    chart_id=f"health-{metric}",
                    title=f"{metric} over time",
                    description=description,
                    points=points,
                    lines=lines,
                ),
                latest=points[-1].value,
                passed=all(g["passed"] for g in gates_now),
            )
        )
    alert = _alert_of(latest, rows)
    recovered = latest if latest.transition == "recovered" else None
    return HealthPanel(rows=rows, charts=charts, metrics=metrics, alert=alert, recovered=recovered)


def _alert_of(latest: FrameHealth, rows: list[FrameHealth]) -> HealthAlert | None:
    """The alert the latest reading stands in, with the reading it began at (within `rows`)."""
    if latest.passed:
        return None
    since = latest
    for row in reversed(rows):
        if row.passed:
            break
        since = row
    failing = tuple(g["key"] for g in latest.gate_results if not g["passed"])
    reasons = "; ".join(g["reason"] for g in latest.gate_results if not g["passed"])
    return HealthAlert(
        project_id=latest.project_id,
        project_slug=latest.project.slug,
        frame_version=latest.frame_version.number,
        since=since.created_at,
        failing=failing,
        summary=reasons,
    )


@dataclass(frozen=True)
class HealthAlert:
    """A project whose promoted frame fails a declared gate at its latest reading."""

    project_id: int
    project_slug: str
    frame_version: int
    since: datetime  # the reading that first failed, of this run of failing readings
    failing: tuple[str, ...]  # "precision max_drop", ...
    summary: str


def health_panel(*, project, user) -> HealthPanel:
    """What the project page shows of its promoted frame's health; checks that `user` may read it."""
    rows = health_history(project=project, user=user)
    for row in rows:
        row.project = project
    panel = panel_of(rows, project=project)
    caps = access.capabilities(user, project)
    can = caps.can_propose or caps.can_review
    return replace(panel, can_request=can)

def health_alerts(*, project_ids) -> list[HealthAlert]:
    """The projects among `project_ids` whose promoted frame fails a gate now (a fixed number of queries)."""
    latest = (
        FrameHealth.objects.filter(project_id__in=list(project_ids))
        .order_by("project_id", "-created_at", "-id")
        .distinct("project_id")
        .select_related("project", "frame_version")
        .defer("per_task")
    )
    alerts = []
    failing_now = [row for row in latest if not row.passed]
    if not failing_now:
        return alerts
    # when each run of failing readings began: the latest alert of each project
    began = {}
    for project_id, at in (
        FrameHealth.objects.filter(project_id__in=[r.project_id for r in failing_now], transition="alert")
        .order_by("project_id", "-created_at", "-id")
        .distinct("project_id")
        .values_list("project_id", "created_at")
    ):
        began[project_id] = at
    for row in failing_now:
        alerts.append(
            HealthAlert(
                project_id=row.project_id,
                project_slug=row.project.slug,
                frame_version=row.frame_version.number,
                since=began.get(row.project_id, row.created_at),
                failing=tuple(g["key"] for g in row.gate_results if not g["passed"]),
                summary="; ".join(g["reason"] for g in row.gate_results if not g["passed"]),
            )
        )
    return sorted(alerts, key=lambda a: a.project_slug)

