"""Ablation of a proposal: what each part of its patch does alone and within the whole; pure, no Django.

A part is one patched field path (rules.frame_patch.patch_parts): a work type's list, the scope,
the class pull, the gates, any other top-level field. A backtest of a proposal of 2 to
MAX_ABLATION_PARTS parts also replays every task under each part alone and under the proposal
without each part (`plan`: identical variants are replayed once), then judges each part:

  alone     mean(part alone) − mean(baseline), per metric: what the part does by itself
  marginal  mean(whole) − mean(whole without the part), per metric: what it adds to the rest
  gates     the project's gates judging the part alone against the baseline

A part is FLAGGED when it costs more than it gives within the whole, that is when its marginal
change, judged with the whole without the part as the baseline:

  - lowers the primary metric (marginal < 0), or
  - adds nothing to it (marginal at most min_improvement) while making any gated metric worse
    (in that metric's better direction, by any amount), or
  - breaks a relative limit: a max_drop / max_rise on the marginal mean delta, a max_task_drop
    on any task's marginal delta, or
  - breaks an absolute limit (max, min) that the whole without it keeps.

Its hurt tasks are the tasks whose gated metrics (the primary and every limit's metric, each
read in its better direction) the part makes worse within the whole. Means, not intervals: the
flag is a pointer for the reviewer, the gates of the whole still decide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import fsum

from . import gate_verdict as gate_rules
from .gate_verdict import EPSILON, Gates, fmt, signed

TaskMetrics = Mapping[str, Mapping[str, float]]  # task id -> metric -> value

# the bounds whose metric is better higher; every other bound's metric is better lower
HIGHER_BOUNDS = ("max_drop", "min", "max_task_drop")


@dataclass(frozen=True)
class Plan:
    """Which variants a backtest replays: `variants[i]` is the set of parts applied over the base;
    `alone[part]` and `without[part]` index into it."""

    parts: tuple[str, ...]
    variants: tuple[tuple[str, ...], ...]
    alone: dict[str, int]
    without: dict[str, int]


def plan(parts: Sequence[str]) -> Plan:
    """Each part alone, then the whole without each part, identical variants once (with two
    parts, one part alone is the whole without the other)."""
    parts = tuple(parts)
    variants: list[tuple[str, ...]] = []

    def index(included: tuple[str, ...]) -> int:
        if included not in variants:
            variants.append(included)
        return variants.index(included)

    alone = {p: index((p,)) for p in parts}
    without = {p: index(tuple(q for q in parts if q != p)) for p in parts}
    return Plan(parts, tuple(variants), alone, without)


@dataclass(frozen=True)
class PartEffect:
    part: str
    alone: dict[str, float]
    marginal: dict[str, float]
    alone_passed: bool
    alone_gates: tuple[dict, ...]  # {gate, metric, passed, reason} of the part judged alone
    flagged: bool
    why: tuple[str, ...]  # what made it flagged, one sentence each
    hurt_tasks: tuple[str, ...]

    def as_dict(self) -> dict:
        return {
            "part": self.part,
            "alone": dict(self.alone),
            "marginal": dict(self.marginal),
            "alone_passed": self.alone_passed,
            "alone_gates": [dict(g) for g in self.alone_gates],
            "flagged": self.flagged,
            "why": list(self.why),
            "hurt_tasks": list(self.hurt_tasks),
        }


@dataclass(frozen=True)
class _Direction:
    metric: str
    higher_is_better: bool = field(default=True)


def _mean(side: TaskMetrics, tasks: Sequence[str], metric: str) -> float:
    return fsum(float(side[t][metric]) for t in tasks) / len(tasks) if tasks else 0.0


def _directions(spec: Gates) -> list[_Direction]:
    found = {spec.primary: True}
    for limit in spec.limits:
        for bound, _value in limit.bounds:
            found.setdefault(limit.metric, bound in HIGHER_BOUNDS)
    return [_Direction(m, up) for m, up in found.items()]


def _costs(
    spec: Gates, tasks, whole: TaskMetrics, without: TaskMetrics, marginal: dict[str, float], directions
) -> list[str]:
    why = []
    primary = spec.primary
    if marginal[primary] < -EPSILON:
        why.append(f"it lowers {primary} by {fmt(-marginal[primary])} within the whole")
    elif marginal[primary] <= spec.min_improvement + EPSILON:
        worse = [
            f"{d.metric} {signed(marginal[d.metric])}"
            for d in directions
            if d.metric != primary and marginal[d.metric] * (1 if d.higher_is_better else -1) < -EPSILON
        ]
        if worse:
            why.append(
                f"it adds nothing to {primary} within the whole ({signed(marginal[primary])}) "
                f"but costs {', '.join(worse)}"
            )
    for limit in spec.limits:
        metric = limit.metric
        for bound, value in limit.bounds:
            if bound == "max_drop" and -marginal[metric] > value + EPSILON:
                why.append(f"it lowers {metric} by {fmt(-marginal[metric])}, more than the {value:g} allowed")
            elif bound == "max_rise" and marginal[metric] > value + EPSILON:
                why.append(f"it raises {metric} by {fmt(marginal[metric])}, more than the {value:g} allowed")
            elif bound == "max_task_drop":
                broke = [
                    t for t in tasks if float(without[t][metric]) - float(whole[t][metric]) > value + EPSILON
                ]
                if broke:
                    why.append(f"it lowers {metric} by more than {value:g} on {', '.join(broke)}")
            elif bound in ("max", "min"):
                with_it, without_it = _mean(whole, tasks, metric), _mean(without, tasks, metric)
                if bound == "max":
                    breaks, keeps = with_it > value + EPSILON, without_it <= value + EPSILON
                else:
                    breaks, keeps = with_it < value - EPSILON, without_it >= value - EPSILON
                if breaks and keeps:
                    side = "above the maximum" if bound == "max" else "below the minimum"
                    why.append(
                        f"with it {metric} is {fmt(with_it)}, {side} of {value:g}; without it {fmt(without_it)}"
                    )
    return why


def ablate(
    gates: Gates | Mapping,
    chosen: Plan,
    baseline: TaskMetrics,
    whole: TaskMetrics,
    variants: Mapping[int, TaskMetrics],
) -> list[PartEffect]:
    """Each part's effect, in the plan's part order. Every side covers the baseline's tasks."""
    spec = Gates.from_spec(gates)
    tasks = list(baseline)
    metrics = sorted(set().union(*(m.keys() for m in baseline.values()))) if tasks else []
    directions = _directions(spec)
    effects = []
    for part in chosen.parts:
        alone, without = variants[chosen.alone[part]], variants[chosen.without[part]]
        base_mean = {m: _mean(baseline, tasks, m) for m in metrics}
        alone_delta = {m: _mean(alone, tasks, m) - base_mean[m] for m in metrics}
        marginal = {m: _mean(whole, tasks, m) - _mean(without, tasks, m) for m in metrics}
        judged = gate_rules.decide(spec, baseline, alone)
        why = _costs(spec, tasks, whole, without, marginal, directions)
        hurt = tuple(
            t
            for t in tasks
            if any(
                (float(whole[t][d.metric]) - float(without[t][d.metric])) * (1 if d.higher_is_better else -1)
                < -EPSILON
                for d in directions
            )
        )
        effects.append(
            PartEffect(
                part=part,
                alone=alone_delta,
                marginal=marginal,
                alone_passed=judged.passed,
                alone_gates=tuple(
                    {"gate": g.gate, "metric": g.metric, "passed": g.passed, "reason": g.reason} for g in judged.gates
                ),
                flagged=bool(why),
                why=tuple(why),
                hurt_tasks=hurt,
            )
        )
    return effects


def summary(effect: Mapping) -> str:
    """One line for a stored part effect: what it does alone and within the whole."""
    primary = next((g["metric"] for g in effect.get("alone_gates", ()) if g["gate"] == gate_rules.PRIMARY_GATE), None)
    if primary is None:
        return effect["part"]
    text = (
        f"{effect['part']}: {primary} {signed(effect['alone'].get(primary, 0.0))} alone, "
        f"{signed(effect['marginal'].get(primary, 0.0))} within the whole"
    )
    if effect.get("flagged"):
        text += "; " + "; ".join(effect.get("why", ()))
    return text
