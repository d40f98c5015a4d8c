"""Ranking: class-preference buckets, the rank score inside a bucket with its parts recorded, explicit
tie-breaks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from .conditions import Condition
from .outputs import Contribution, Effect
from .policy import Working
from .signals import preference_tier
from .types import EngineConfig


def _contributions(
    c: Working, condition: Condition, config: EngineConfig, open_loop_applies: bool
) -> tuple[Contribution, ...]:
    """Each signal's part in the rank score, in the order the score is built (they sum to it)."""
    s = c.signals
    score = round(c.query_score, 6)
    parts = [
        Contribution(name, effect, round(share * score, 6), note)
        for name, effect, share, note in c.base_parts
    ]
    named = {p.signal for p in parts}
    idle = f"informational under {condition.name}"
    steps = (
        ("recency", Effect.MULTIPLIER, 0.5 + 0.5 * s["recency"], condition.recency),
        ("temporal_validity", Effect.MULTIPLIER, s["temporal_validity"], condition.layers),
        ("evidence_strength", Effect.MULTIPLIER, s["evidence_strength"], condition.layers),
        (
            "open_loop_relevance",
            Effect.ADDITIVE,
            config.open_loop_weight,
            condition.layers and open_loop_applies,
        ),
        ("adjacency", Effect.ADDITIVE, config.adjacency_weight, condition.adjacency),
    )
    for name, effect, amount, on in steps:
        if not on:
            parts.append(_idle(name, idle))
        elif effect == Effect.MULTIPLIER:
            new = score * amount
            parts.append(Contribution(name, effect, round(new - score, 6), f"x {amount:g}"))
            score = new
        else:
            term = amount * s[name]
            parts.append(Contribution(name, effect, round(term, 6), f"+ {amount:g} x {s[name]:g}"))
            score += term
    objective_note = (
        "not in the objective's fused list" if condition.objective_expansion else "no objective query"
    )
    for name, note in (
        ("query_relevance", "not in the query's fused list"),
        ("objective_relevance", objective_note),
        ("goal_relevance", "informational: the class bucket orders by the class preference"),
        ("project_relevance", "the scope rule (eligibility)" if condition.scope_filter else "informational"),
        ("redundancy", "the redundancy rule at admission" if condition.redundancy_rule else "informational"),
    ):
        if name not in named:
            parts.append(_idle(name, note))
    return tuple(parts)


@lru_cache(maxsize=256)
def _idle(signal: str, note: str) -> Contribution:
    """A signal's zero part (frozen, so one object serves every candidate that has it)."""
    return Contribution(signal, Effect.NONE, 0.0, note)


def _rank_score(c: Working, condition: Condition, config: EngineConfig, open_loop_applies: bool) -> float:
    """The rank score exactly as the policy defines it (the contributions decompose it)."""
    s = c.signals
    score = round(c.query_score, 6)
    if condition.recency:
        score *= 0.5 + 0.5 * s["recency"]
    if condition.layers:
        score *= s["temporal_validity"] * s["evidence_strength"]
        if open_loop_applies:
            score += config.open_loop_weight * s["open_loop_relevance"]
    if condition.adjacency:
        score += config.adjacency_weight * s["adjacency"]
    return score


def rank(
    eligible: Sequence[Working],
    *,
    condition: Condition,
    prefs: Sequence[str],
    config: EngineConfig,
    open_loop_applies: bool,
    head: Mapping[int, int] | None = None,
) -> list[Working]:
    """Order by (class bucket, rank score desc, retrieval rank, unit id); the units of an inferred
    frame's query-only `head` take bucket -1, ahead of every class bucket. Under
    `config.weak_support_fraction` f, a retrieved (not pulled) candidate of a listed class whose
    evidence is below f x the best evidence of the eligible pool takes the weak bucket
    len(prefs) + 1, after every class bucket; its goal_relevance note says why it moved.

    rank_score = retrieval score (query_score: the pool position of the fused query and objective
                 lists; a pulled unit's pull score)
                 x (0.5 + 0.5 recency)                        [C1]
                 x temporal_validity x evidence_strength      [C5+]
                 + 0.15 open_loop_relevance                   [C5+, work-frame conditions]
                 + 0.05 adjacency                             [C6]
    Each candidate records every signal's contribution (they sum to the rank score).
    """
    absent = len(prefs)
    bucketed = not (condition.class_policy == "none" or condition.flat_rank)
    fraction = config.weak_support_fraction
    best = max((evidence(c) for c in eligible), default=0.0) if bucketed and fraction else 0.0
    for c in eligible:
        c.contributions = _contributions(c, condition, config, open_loop_applies)
        c.rank_score = round(_rank_score(c, condition, config, open_loop_applies), 6)
        if not bucketed:
            c.bucket = 0
        else:
            tier = preference_tier(c.unit.evidence_class, prefs)
            c.bucket = absent if tier is None else tier
            if tier is not None and best > 0 and not pulled(c) and not (head and c.pos in head):
                mine = evidence(c)
                if mine < fraction * best:
                    c.bucket = absent + 1
                    c.contributions = _weak_note(c.contributions, tier, mine, fraction, best)
        if head and c.pos in head:
            c.bucket = -1
    ranked = sorted(eligible, key=lambda c: (c.bucket, -c.rank_score, c.retrieval_rank, c.uid))
    for i, c in enumerate(ranked, start=1):
        c.rank = i
    return ranked


def evidence(c) -> float:
    """A candidate's marginal evidence (the stop rule's and the weak bucket's): the strongest of
    its query relevance, objective relevance and retrieval score (a pulled unit has only the
    last)."""
    s = c.signals
    return max(s.get("query_relevance", 0.0), s.get("objective_relevance", 0.0), c.query_score)


def pulled(c: Working, by: str = "") -> bool:
    """Whether a pull (class pull, successor, recency, ...) added the candidate rather than
    retrieval; with `by`, a pull whose note starts with it ("class_pull")."""
    return any(name == "pull" and note.startswith(by) for name, _, _, note in c.base_parts)


def _weak_note(
    parts: tuple[Contribution, ...], tier: int, mine: float, fraction: float, best: float
) -> tuple[Contribution, ...]:
    """The contributions with goal_relevance's zero part saying why the candidate left its class
    bucket (the rank score is unchanged: only the bucket moves)."""
    note = (
        f"weak support: evidence {mine:.3f} < {fraction:g} x {best:.3f}, the best in the eligible "
        f"pool; leaves class bucket {tier} for the weak bucket, after every class bucket"
    )
    return tuple(
        Contribution(p.signal, p.effect, p.value, note) if p.signal == "goal_relevance" else p
        for p in parts
    )
