"""Gate decisions: pure functions over per-task metrics, no Django; every gate says why it passed.

A backtest passes iff the mean of the primary metric rises by more than `min_improvement` and no
limit is breached. Limits compare means over the same tasks:

  max_drop  x   the candidate mean may fall at most x below the baseline mean
  max_rise  x   the candidate mean may rise at most x above the baseline mean
  max       x   the candidate mean may be at most x
  min       x   the candidate mean must be at least x

Comparisons allow EPSILON of float noise, so "no worse" (max_rise 0.0) holds for equal means
summed in another order, and a delta of 1e-17 is not an improvement. The specification is the
engine's typed Gates (selection.engine.gates), the one the corpus reader builds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from math import fsum

from selection.engine.gates import DEFAULT_PRIMARY, LIMIT_BOUNDS, Gates, GateSpecError

__all__ = [
    "DEFAULT_PRIMARY",
    "EPSILON",
    "LIMIT_BOUNDS",
    "PRIMARY_GATE",
    "Decision",
    "GateResult",
    "GateSpecError",
    "Gates",
    "TaskDelta",
    "decide",
    "fmt",
    "gate_metrics",
    "judge_limit",
    "judge_primary",
    "signed",
]

EPSILON = 1e-9
PRIMARY_GATE = "primary"

TaskMetrics = Mapping[str, Mapping[str, float]]  # task id -> metric -> value


@dataclass(frozen=True)
class GateResult:
    gate: str  # "primary" or a bound name: max_drop, max_rise, max, min
    metric: str
    limit: float
    baseline: float
    candidate: float
    delta: float
    passed: bool
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TaskDelta:
    task: str
    baseline: dict[str, float]
    candidate: dict[str, float]
    delta: dict[str, float]

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Decision:
    passed: bool
    primary_metric: str
    metrics: tuple[str, ...]  # the primary metric, then each gate metric once, in gate order
    baseline_means: dict[str, float]
    candidate_means: dict[str, float]
    gates: tuple[GateResult, ...]
    per_task: tuple[TaskDelta, ...]

    @property
    def primary(self) -> GateResult:
        return self.gates[0]

    @property
    def reason(self) -> str:
        failed = [g.reason for g in self.gates if not g.passed]
        return "; ".join(failed) if failed else self.primary.reason


def fmt(value: float) -> str:
    """Three decimals for rates, one for large quantities such as tokens."""
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.3f}"


def signed(value: float) -> str:
    text = fmt(abs(value))
    return f"+{text}" if value >= 0 else f"−{text}"


def _mean(values: Sequence[float]) -> float:
    return fsum(values) / len(values) if values else 0.0


def gate_metrics(gates: Gates | Mapping) -> tuple[str, ...]:
    """The primary metric, then each limit's metric, each once."""
    return Gates.from_spec(gates).metrics


def _moved(metric: str, baseline: float, candidate: float) -> str:
    if candidate > baseline + EPSILON:
        return f"{metric} rose to {fmt(candidate)} from {fmt(baseline)}"
    if candidate < baseline - EPSILON:
        return f"{metric} fell to {fmt(candidate)} from {fmt(baseline)}"
    return f"{metric} held at {fmt(candidate)}"


def judge_primary(metric: str, min_improvement: float, baseline: float, candidate: float) -> GateResult:
    delta = candidate - baseline
    passed = delta > min_improvement + EPSILON
    moved = f"{_moved(metric, baseline, candidate)} ({signed(delta)})"
    if passed:
        reason = f"{moved}, more than the {min_improvement:g} required"
    else:
        reason = f"{moved}; it must rise by more than {min_improvement:g}"
    return GateResult(PRIMARY_GATE, metric, min_improvement, baseline, candidate, delta, passed, reason)


def judge_limit(metric: str, bound: str, limit: float, baseline: float, candidate: float) -> GateResult:
    delta = candidate - baseline
    moved = _moved(metric, baseline, candidate)
    if bound in ("max_drop", "max_rise"):
        change = -delta if bound == "max_drop" else delta
        word = "drop" if bound == "max_drop" else "rise"
        allowed = f"the {limit:g} {word} allowed" if limit else f"no {word} allowed"
        passed = change <= limit + EPSILON
        if change <= EPSILON:
            reason = f"{moved}: no {word}"
        elif passed:
            reason = f"{moved}, within {allowed}"
        else:
            reason = f"{moved}, more than {allowed}" if limit else f"{moved}, {allowed}"
    elif bound == "max":
        passed = candidate <= limit + EPSILON
        side = "within" if passed else "above"
        reason = f"{metric} is {fmt(candidate)}, {side} the maximum of {limit:g}"
    elif bound == "min":
        passed = candidate >= limit - EPSILON
        side = "within" if passed else "below"
        reason = f"{metric} is {fmt(candidate)}, {side} the minimum of {limit:g}"
    else:
        raise GateSpecError(f'unknown limit bound "{bound}": one of {", ".join(LIMIT_BOUNDS)}')
    return GateResult(bound, metric, float(limit), baseline, candidate, delta, passed, reason)


def decide(gates: Gates | Mapping, baseline: TaskMetrics, candidate: TaskMetrics) -> Decision:
    """Judge a candidate's per-task metrics against the baseline's under `gates`.

    `gates` is the typed Gates, or a stored mapping read into one. Both sides must cover the same
    tasks; per-task rows keep the baseline's task order.
    """
    if set(baseline) != set(candidate):
        missing = sorted(set(baseline) ^ set(candidate))
        raise GateSpecError(f"baseline and candidate replayed different tasks: {', '.join(missing)}")
    if not baseline:
        raise GateSpecError("no task was replayed: there is nothing to judge")
    tasks = list(baseline)
    spec = Gates.from_spec(gates)
    primary = spec.primary
    measured = sorted(set().union(*(m.keys() for m in baseline.values())))
    wanted = spec.metrics
    for name in wanted:
        if any(name not in baseline[t] or name not in candidate[t] for t in tasks):
            raise GateSpecError(f'the gate metric "{name}" was not measured for every task')

    def means(side: TaskMetrics) -> dict[str, float]:
        return {name: _mean([float(side[t][name]) for t in tasks]) for name in measured}

    base_means, cand_means = means(baseline), means(candidate)
    results = [judge_primary(primary, spec.min_improvement, base_means[primary], cand_means[primary])]
    for limit in spec.limits:
        metric = limit.metric
        for bound, value in limit.bounds:
            results.append(judge_limit(metric, bound, value, base_means[metric], cand_means[metric]))
    per_task = tuple(
        TaskDelta(
            task=t,
            baseline={m: float(baseline[t][m]) for m in wanted},
            candidate={m: float(candidate[t][m]) for m in wanted},
            delta={m: float(candidate[t][m]) - float(baseline[t][m]) for m in wanted},
        )
        for t in tasks
    )
    return Decision(
        passed=all(g.passed for g in results),
        primary_metric=primary,
        metrics=wanted,
        baseline_means=base_means,
        candidate_means=cand_means,
        gates=tuple(results),
        per_task=per_task,
    )
