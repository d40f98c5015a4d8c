"""The condition ladder C0..C6 and the oracle CO: named policies chosen by a registry that rejects
unknown names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .types import ESTABLISHMENTS, EstablishmentPolicy


class UnknownCondition(ValueError):
    pass


@dataclass(frozen=True)
class Condition:
    """Which parts of the pipeline a named condition switches on; each rung adds to the last."""

    name: str
    label: str
    scope_filter: bool = False  # eligibility: drop units outside the frame's scope
    recency: bool = False  # C1: add the most recent units to the pool and weight by recency
    # none | default (ProjectFrame.default_classes) | work_type | merged (plausible work types)
    class_policy: str = "none"
    objective_expansion: bool = False  # the objective runs as a second query, fused with the first
    class_pull: bool = False  # each preferred class is guaranteed `class_pull` candidates
    # the pool widens while its tail scores near its head (widening.py); off below C4, so the
    # query-only rungs keep the book's fixed pool of 40
    pool_widening: bool = False
    layers: bool = (
        False  # temporal/evidential/open-loop signals weight the rank score; supersession rule
    )
    successor_pull: bool = False  # a superseded candidate pulls its successor into the pool
    adjacency: bool = False  # the adjacency signal weights the rank score
    coalescing: bool = False  # echo folding, dissent items, supersession notes
    redundancy_rule: bool = False  # reject items too similar to one already admitted
    admission_stop: bool = False  # the frame's stop rule may end the bundle before the budget
    oracle: bool = False  # read the hidden ledger (CO only)
    hard_class_rule: bool = True  # False: class absence is recorded but never excludes (soft frame)
    flat_rank: bool = False  # True: rank by score alone, ignoring class buckets
    # an inferred frame's hedge: the share of the budget kept for the head of the scoped
    # query-only ranking, admissible whatever its class and ranked ahead of the class buckets
    query_head: float = 0.0


_C0 = Condition("C0", "strong RAG, query only")
_C1 = replace(_C0, name="C1", label="C0 + recency preference", recency=True)
_C2 = replace(_C0, name="C2", label="C0 restricted to the frame scope", scope_filter=True)
_C3 = replace(
    _C2, name="C3", label="C2 + ProjectFrame default class policy", class_policy="default"
)
_C4 = replace(
    _C3,
    name="C4",
    label="C3 + WorkFrame: objective-expanded recall, work-type policy, class pull, pool widening",
    class_policy="work_type",
    objective_expansion=True,
    class_pull=True,
    pool_widening=True,
)
_C5 = replace(
    _C4,
    name="C5",
    label="C4 + temporal, evidential and open-loop signals with successor pulls",
    layers=True,
    successor_pull=True,
)
_C6 = replace(
    _C5,
    name="C6",
    label="C5 + adjacency, coalescing, redundancy and the admission stop rule",
    adjacency=True,
    coalescing=True,
    redundancy_rule=True,
    admission_stop=True,
)
_CO = Condition("CO", "ledger oracle: MUST then SHOULD units within the budget", oracle=True)

CONDITIONS: dict[str, Condition] = {c.name: c for c in (_C0, _C1, _C2, _C3, _C4, _C5, _C6, _CO)}
LADDER: tuple[str, ...] = ("C0", "C1", "C2", "C3", "C4", "C5", "C6")


def get_condition(name: str) -> Condition:
    try:
        return CONDITIONS[name]
    except KeyError:
        known = ", ".join(CONDITIONS)
        raise UnknownCondition(f"unknown condition {name!r}; known: {known}") from None


def effective_condition(
    condition: Condition,
    establishment: str,
    *,
    enabled: bool = True,
    policy: EstablishmentPolicy | None = None,
) -> tuple[Condition, str]:
    """Abstention: weaken work-frame conditioning as the frame's establishment degrades, as the
    project frame's establishment policy says.

    Declared and confidently inferred frames run exactly as named. Only conditions that read the
    work frame (class_policy == "work_type") are touched:
      inferred-ambiguous, policy "merge" -> "<name>~merged": scope kept, the preference widened to
          the merged order of the plausible work types (eligibility and class pull read it; the
          ranking does not bucket by it);
      inferred-ambiguous, policy "soft" -> "<name>~soft": the frame may still widen recall
          (objective query, class pull) but neither excludes nor reorders;
      unknown (or ambiguous under policy "query") -> "<name>~query": no objective query, no class
          pull, no class policy; scope and the corpus-fact layers (supersession, evidence,
          coalescing) stay, since they do not depend on what the work is.
    Every inferred frame that keeps work-frame conditioning (confident, or ambiguous under
    "merge"/"soft") is also hedged when the policy's `query_head` is above 0 -> "...~head": that
    share of the budget goes first to the head of the scoped query-only ranking, whatever its
    class, so a misread work type cannot crowd out what the query alone finds first.
    Returns the condition to run and a note for the trace ("" when unchanged).
    """
    if establishment not in ESTABLISHMENTS:
        raise ValueError(
            f"unknown establishment {establishment!r}; known: {', '.join(ESTABLISHMENTS)}"
        )
    policy = policy or EstablishmentPolicy()
    if not enabled or condition.class_policy != "work_type":
        return condition, ""
    chosen, note = _abstain(condition, establishment, policy)
    if establishment in ("inferred-confident", "inferred-ambiguous") and policy.query_head > 0:
        if chosen.class_policy in ("work_type", "merged"):
            share = policy.query_head
            chosen = replace(chosen, name=f"{chosen.name}~head", query_head=share)
            hedge = (
                f"work frame {establishment}: the first {share:.0%} of the budget kept for the "
                "head of the scoped query-only ranking, whatever its class"
            )
            note = f"{note}; {hedge.split(': ', 1)[1]}" if note else hedge
    return chosen, note


def _abstain(condition: Condition, establishment: str, policy: EstablishmentPolicy):
    behaviour = None
    if establishment == "inferred-ambiguous":
        behaviour = policy.ambiguous
    elif establishment == "unknown":
        behaviour = policy.unknown
    if behaviour == "merge":
        # the order between the plausible work types' classes is exactly what is not
        # established, so the merged list widens eligibility and class pull but does not bucket
        # the ranking: candidates rank by score (measured on fixtures/context-lab, docs/results.md)
        merged = replace(
            condition,
            name=f"{condition.name}~merged",
            class_policy="merged",
            flat_rank=True,
            admission_stop=False,  # the stop rule reads class buckets, which are not established
        )
        return merged, (
            "work frame inferred-ambiguous: scope kept, preference widened to the plausible "
            "work types (merged order; ranked by score, not by class)"
        )
    if behaviour == "soft":
        soft = replace(
            condition,
            name=f"{condition.name}~soft",
            hard_class_rule=False,
            flat_rank=True,
            admission_stop=False,
        )
        return soft, (
            f"work frame {establishment}: frame widens recall but neither excludes nor reorders"
        )
    if behaviour == "query":
        query_only = replace(
            condition,
            name=f"{condition.name}~query",
            class_policy="none",
            objective_expansion=False,
            class_pull=False,
            admission_stop=False,
        )
        return query_only, (
            f"work frame {'establishment unknown' if establishment == 'unknown' else establishment}: "
            "work-frame conditioning withdrawn, scoped query-only selection"
        )
    return condition, ""
