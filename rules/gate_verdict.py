"""Gate decisions: pure functions over per-task metrics, no Django; every gate says why it passed.

A backtest passes iff the mean of the primary metric rises by more than `min_improvement` and no
limit is breached. Limits compare means over the same tasks:

  max_drop  x   the candidate mean may fall at most x below the baseline mean
  max_rise  x   the candidate mean may rise at most x above the baseline mean
  max       x   the candidate mean may be at most x
  min       x   the candidate mean must be at least x
  max_task_drop x   no single task may fall more than x below its own baseline (the reason
                    names the tasks that did), whatever the mean does

Every gate also reports the mean delta of its metric with a 95 % interval from a paired
bootstrap over tasks (BOOTSTRAP_SAMPLES resamples, seeded: the same replays give the same
interval on any machine) and how many tasks improved, regressed and held. With
`require_interval: true` the primary gate must clear its threshold with the interval's lower
bound, and max_drop / max_rise limits are judged on the interval's adverse end.

A change is held to the standard its frame declares for its kind (gates.held_to): superiority,
the primary gate above; non-inferiority, "no worse": the primary delta's interval lower bound is
at least −margin; review-only (a neutral change): no gate, the reviewers decide.

Comparisons allow EPSILON of float noise, so "no worse" (max_rise 0.0) holds for equal means
summed in another order, and a delta of 1e-17 is not an improvement. The specification is the
engine's typed Gates (selection.engine.gates), the one the corpus reader builds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from math import fsum

import numpy as np

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
BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 20261130
MIN_TASKS = 10  # fewer tasks than this: the page says the delta cannot be told from noise

TaskMetrics = Mapping[str, Mapping[str, float]]  # task id -> metric -> value

# frame keys no selection reads (the engine never looks at them): a change of these alone is neutral
NON_SELECTION_KEYS = ("purpose", "objectives", "constraints", "approval", "gates")


def change_kind(kind: str, base: Mapping, candidate: Mapping) -> tuple[str, tuple[str, ...]]:
    """("neutral", keys) when every top-level key that differs is one no selection reads (or an
    "x-" extension), else (kind, keys): the kind of change its standard is chosen by."""
    keys = tuple(sorted(k for k in set(base) | set(candidate) if base.get(k) != candidate.get(k)))
    if keys and all(k in NON_SELECTION_KEYS or k.startswith("x-") for k in keys):
        return "neutral", keys
    return kind, keys


@dataclass(frozen=True)
class Standard:
    """What the primary gate asks: superiority, non_inferiority (with margin) or review_only."""

    name: str = "superiority"
    margin: float = 0.0
    against: str = ""  # what the candidate is judged against, in words, when not the baseline


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
    interval: tuple[float, float] | None = None  # 95 % paired-bootstrap interval of the mean delta
    improved: int = 0
    regressed: int = 0
    held: int = 0
    evidence: str = ""  # the interval and the counts, in one sentence
    tasks: tuple[str, ...] = ()  # max_task_drop: the tasks that broke the floor
    standard: str = "superiority"  # the standard the change was held to (the primary gate's test)
    against: str = ""  # what the candidate was judged against, when not the backtest's baseline

    def as_dict(self) -> dict:
        doc = asdict(self)
        doc["interval"] = list(self.interval) if self.interval is not None else None
        doc["tasks"] = list(self.tasks)
        return doc


@dataclass(frozen=True)
class Spread:
    """How one metric moved across tasks: mean delta, its bootstrap interval, the counts."""

    mean: float
    low: float
    high: float
    improved: int
    regressed: int
    held: int
    tasks: int

    @property
    def sentence(self) -> str:
        text = (
            f"mean {signed(self.mean)}, 95 % interval {signed(self.low)} to {signed(self.high)} "
            f"over {self.tasks} tasks; {self.improved} improved, {self.regressed} regressed, {self.held} held"
        )
        if self.tasks < MIN_TASKS:
            text += f" — {self.tasks} tasks are too few for a delta this size to mean anything"
        elif self.low <= EPSILON and self.high >= -EPSILON and abs(self.mean) > EPSILON:
            text += " — the interval includes zero: this task set cannot tell the change from noise"
        return text


def spread(deltas: Sequence[float]) -> Spread:
    """Mean delta with a seeded paired-bootstrap 95 % interval (resampling tasks), and counts."""
    values = np.asarray(deltas, dtype=np.float64)
    n = len(values)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = values[rng.integers(0, n, size=(BOOTSTRAP_SAMPLES, n))].mean(axis=1)
    low, high = (float(x) for x in np.percentile(means, [2.5, 97.5]))
    return Spread(
        mean=_mean(list(values)),
        low=low,
        high=high,
        improved=int((values > EPSILON).sum()),
        regressed=int((values < -EPSILON).sum()),
        held=int((np.abs(values) <= EPSILON).sum()),
        tasks=n,
    )


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


def judge_primary_interval(
    metric: str, min_improvement: float, baseline: float, candidate: float, s: Spread
) -> GateResult:
    """The primary gate on the interval's lower bound: the rise must hold at its low end."""
    delta = candidate - baseline
    passed = s.low > min_improvement + EPSILON
    moved = f"{_moved(metric, baseline, candidate)} ({signed(delta)})"
    bound = f"its 95 % interval's lower bound is {signed(s.low)}"
    if passed:
        reason = f"{moved}; {bound}, more than the {min_improvement:g} required"
    else:
        reason = f"{moved}, but {bound}: the interval must clear {min_improvement:g}"
    return GateResult(PRIMARY_GATE, metric, min_improvement, baseline, candidate, delta, passed, reason)


def judge_non_inferior(
    metric: str, margin: float, baseline: float, candidate: float, s: Spread, against: str
) -> GateResult:
    """Non-inferiority: the interval's lower bound may be no lower than −margin ("no worse")."""
    delta = candidate - baseline
    passed = s.low >= -margin - EPSILON
    where = f" against {against}" if against else ""
    moved = f"{_moved(metric, baseline, candidate)} ({signed(delta)}){where}"
    allowed = f"the {margin:g} it may fall" if margin else "no fall"
    bound = f"its 95 % interval's lower bound is {signed(s.low)}"
    if passed:
        reason = f"{moved}; {bound}, within {allowed}: no worse"
    else:
        reason = f"{moved}, but {bound}: it must be no worse, {allowed} allowed"
    return GateResult(PRIMARY_GATE, metric, margin, baseline, candidate, delta, passed, reason)


def judge_review_only(metric: str, baseline: float, candidate: float, keys: str) -> GateResult:
    delta = candidate - baseline
    reason = (
        f"this change touches no selection input ({keys}): it needs review only; {_moved(metric, baseline, candidate)}"
    )
    return GateResult(PRIMARY_GATE, metric, 0.0, baseline, candidate, delta, True, reason)


def judge_task_floor(
    metric: str, limit: float, baseline: Mapping[str, float], candidate: Mapping[str, float]
) -> GateResult:
    """max_task_drop: no task may fall more than `limit` below its own baseline."""
    drops = {t: baseline[t] - candidate[t] for t in baseline}
    broke = tuple(t for t in baseline if drops[t] > limit + EPSILON)
    base, cand = _mean(list(baseline.values())), _mean(list(candidate.values()))
    worst = max(drops.values(), default=0.0)
    if broke:
        listed = ", ".join(f"{t} ({signed(-drops[t])})" for t in broke)
        reason = f"{metric} fell by more than the {limit:g} a task may lose on {listed}"
    elif worst > EPSILON:
        reason = f"no task lost more than {limit:g} of {metric} (the worst lost {fmt(worst)})"
    else:
        reason = f"no task lost any {metric}"
    return GateResult("max_task_drop", metric, float(limit), base, cand, cand - base, not broke, reason, tasks=broke)


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


def decide(
    gates: Gates | Mapping, baseline: TaskMetrics, candidate: TaskMetrics, *, standard: Standard | None = None
) -> Decision:
    """Judge a candidate's per-task metrics against the baseline's under `gates`, held to `standard`
    (superiority when None).

    `gates` is the typed Gates, or a stored mapping read into one. Both sides must cover the same
    tasks; per-task rows keep the baseline's task order. Review-only judges no limit.
    """
    standard = standard or Standard()
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
    spreads = {name: spread([float(candidate[t][name]) - float(baseline[t][name]) for t in tasks]) for name in wanted}
    s = spreads[primary]
    if standard.name == "review_only":
        first = judge_review_only(primary, base_means[primary], cand_means[primary], standard.against)
    elif standard.name == "non_inferiority":
        first = judge_non_inferior(
            primary, standard.margin, base_means[primary], cand_means[primary], s, standard.against
        )
    elif spec.require_interval:
        first = judge_primary_interval(primary, spec.min_improvement, base_means[primary], cand_means[primary], s)
    else:
        first = judge_primary(primary, spec.min_improvement, base_means[primary], cand_means[primary])
    results = [first]
    for limit in spec.limits if standard.name != "review_only" else ():
        metric = limit.metric
        for bound, value in limit.bounds:
            if bound == "max_task_drop":
                per_base = {t: float(baseline[t][metric]) for t in tasks}
                per_cand = {t: float(candidate[t][metric]) for t in tasks}
                results.append(judge_task_floor(metric, value, per_base, per_cand))
                continue
            judged = judge_limit(metric, bound, value, base_means[metric], cand_means[metric])
            if spec.require_interval and bound in ("max_drop", "max_rise"):
                worst = -spreads[metric].low if bound == "max_drop" else spreads[metric].high
                if worst > value + EPSILON and judged.passed:
                    word = "drop" if bound == "max_drop" else "rise"
                    judged = replace(
                        judged,
                        passed=False,
                        reason=f"{judged.reason}, but the 95 % interval allows a {word} of {fmt(worst)}",
                    )
            results.append(judged)
    results = [
        replace(
            g,
            interval=(spreads[g.metric].low, spreads[g.metric].high),
            improved=spreads[g.metric].improved,
            regressed=spreads[g.metric].regressed,
            held=spreads[g.metric].held,
            evidence=spreads[g.metric].sentence,
            standard=standard.name,
            against="" if standard.name == "review_only" else standard.against,
        )
        for g in results
    ]
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
