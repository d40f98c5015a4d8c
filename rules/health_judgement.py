"""A health reading judged under the project's gates: pure functions, no Django.

A backtest judges a candidate against a baseline; a health reading judges the promoted frame now
against the same frame read earlier (each task's first reading under this frame version). So:

  primary        the frame cannot improve on itself, but it must not fall back: the primary
                 metric's mean may not fall below its reference (min_improvement does not apply)
  max_drop, max_rise, max_task_drop   as in a backtest, reference against now, over the same tasks
  max, min       as in a backtest, on the mean now

The interval of `require_interval` is not used: both sides are the same frame, and a reading is
deterministic, so any move is a real one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from math import fsum

from .gate_verdict import EPSILON, PRIMARY_GATE, Gates, GateSpecError, fmt, judge_limit, judge_task_floor

TaskMetrics = Mapping[str, Mapping[str, float]]  # task -> metric -> value


@dataclass(frozen=True)
class HealthGate:
    gate: str  # "primary" or a bound: max_drop, max_rise, max_task_drop, max, min
    metric: str
    limit: float | None  # None for the primary gate
    reference: float  # the mean of the first readings of the same tasks
    value: float  # the mean now
    passed: bool
    reason: str
    tasks: tuple[str, ...] = ()  # max_task_drop: the tasks that broke the floor

    @property
    def key(self) -> str:
        """Names the gate across readings: "precision max_drop"."""
        return f"{self.metric} {self.gate}"

    def as_dict(self) -> dict:
        doc = asdict(self)
        doc["tasks"] = list(self.tasks)
        doc["key"] = self.key
        return doc


@dataclass(frozen=True)
class HealthReading:
    primary_metric: str
    metrics: tuple[str, ...]  # the primary metric, then each gate metric once
    means: dict[str, float]  # every measured metric, mean over the tasks now
    gates: tuple[HealthGate, ...]

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    @property
    def failing(self) -> tuple[str, ...]:
        return tuple(g.key for g in self.gates if not g.passed)


def _mean(values) -> float:
    values = list(values)
    return fsum(values) / len(values) if values else 0.0


def judge_primary_held(metric: str, reference: float, value: float) -> HealthGate:
    if value < reference - EPSILON:
        reason = f"{metric} fell to {fmt(value)} from {fmt(reference)} at the frame's first reading"
        return HealthGate(PRIMARY_GATE, metric, None, reference, value, False, reason)
    if value > reference + EPSILON:
        reason = f"{metric} rose to {fmt(value)} from {fmt(reference)}"
    else:
        reason = f"{metric} held at {fmt(value)}"
    return HealthGate(PRIMARY_GATE, metric, None, reference, value, True, reason)


def judge(gates: Gates | Mapping, reference: TaskMetrics, current: TaskMetrics) -> HealthReading:
    """Judge `current` (task -> metrics now) against `reference` (task -> its first reading).

    Both cover the same tasks: a task read for the first time is its own reference.
    """
    if set(reference) != set(current):
        raise GateSpecError("the reference and the reading cover different tasks")
    if not current:
        raise GateSpecError("no task was replayed: there is nothing to judge")
    spec = Gates.from_spec(gates)
    tasks = list(current)
    for name in spec.metrics:
        if any(name not in current[t] or name not in reference[t] for t in tasks):
            raise GateSpecError(f'the gate metric "{name}" was not measured for every task')
    measured = sorted(set().union(*(m.keys() for m in current.values())))
    now = {m: _mean(float(current[t][m]) for t in tasks if m in current[t]) for m in measured}
    then = {m: _mean(float(reference[t][m]) for t in tasks) for m in spec.metrics}
    primary = spec.primary
    results = [judge_primary_held(primary, then[primary], now[primary])]
    for limit in spec.limits:
        metric = limit.metric
        for bound, value in limit.bounds:
            if bound == "max_task_drop":
                floor = judge_task_floor(
                    metric, value,
                    {t: float(reference[t][metric]) for t in tasks},
                    {t: float(current[t][metric]) for t in tasks},
                )  # fmt: skip
                results.append(
                    HealthGate(bound, metric, float(value), floor.baseline, floor.candidate, floor.passed,
                               floor.reason, floor.tasks)
                )  # fmt: skip
                continue
            judged = judge_limit(metric, bound, value, then[metric], now[metric])
            results.append(
                HealthGate(bound, metric, float(value), then[metric], now[metric], judged.passed, judged.reason)
            )
    return HealthReading(primary_metric=primary, metrics=spec.metrics, means=now, gates=tuple(results))


def transition(before: tuple[str, ...] | None, after: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """("alert", the gates that fail now and did not before), ("recovered", the gates that failed
    before) when none fails any more, or ("", ()) when nothing worth telling changed.

    `before` is the previous reading's failing gates (None without a previous reading). An alert
    is said once per gate that starts failing, not on every reading while it fails.
    """
    before = tuple(before or ())
    new = tuple(g for g in after if g not in before)
    if new:
        return "alert", new
    if before and not after:
        return "recovered", before
    return "", ()
