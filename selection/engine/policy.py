"""Hard eligibility: the class preferences a condition reads, and every rule a candidate must pass
(ranking inside the eligible: ranking.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from .conditions import Condition
from .errors import SelectionError
from .index import CorpusIndex
from .outputs import Contribution, EligibilityCheck
from .reason_codes import ReasonCode, Stage
from .signals import preference_tier, superseded_as_of
from .types import EngineConfig, ProjectFrame, Unit, WorkFrame


class Working:
    """A candidate's mutable record while the pipeline runs; frozen into a CandidateRecord at the
    end.
    """

    __slots__ = (
        "pos",
        "unit",
        "pool_rank",
        "retrieval_rank",
        "query_score",
        "signals",
        "checks",
        "eligible",
        "bucket",
        "rank_score",
        "rank",
        "stage",
        "reason",
        "budget",
        "item_id",
        "redundancy_admitted",
        "noted_on",
        "folded",
        "base_parts",
        "contributions",
        "stop_note",
    )

    def __init__(self, pos: int, unit: Unit, pool_rank: int, query_score: float):
        self.pos = pos
        self.unit = unit
        self.pool_rank = pool_rank
        self.retrieval_rank = 0
        self.query_score = query_score
        self.signals: dict[str, float] = {}
        self.checks: list[EligibilityCheck] = []
        self.eligible = True
        self.bucket: int | None = None
        self.rank_score = 0.0
        self.rank: int | None = None
        self.stage = ""
        self.reason: ReasonCode | None = None
        self.budget: tuple[int, int] = (0, 0)
        self.item_id: str | None = None
        self.redundancy_admitted: float | None = None
        self.noted_on: str | None = None
        self.folded = False
        # (signal, effect, share of query_score, note): what the retrieval score is made of
        self.base_parts: tuple[tuple[str, str, float, str], ...] = ()
        self.contributions: tuple[Contribution, ...] = ()
        self.stop_note: str | None = None  # why the admission stop rule stopped it

    @property
    def uid(self) -> str:
        return self.unit.id


class UnknownWorkType(SelectionError):
    """A declared work type the project frame does not list: an error, never a silent fallback (the
    API answers 422)."""

    @classmethod
    def of(cls, frame: ProjectFrame, work_type: str) -> UnknownWorkType:
        listed = ", ".join(frame.work_type_names) or "none"
        return cls(
            f'work type "{work_type}" is not listed by the {frame.project} frame '
            f"v{frame.version}; listed: {listed}"
        )


def preferences(condition: Condition, frame: ProjectFrame, work: WorkFrame) -> tuple[str, ...]:
    """The class-preference order the condition ranks by (see `class_order`)."""
    return class_order(condition, frame, work)[0]


def class_order(
    condition: Condition, frame: ProjectFrame, work: WorkFrame
) -> tuple[tuple[str, ...], str]:
    """The class list the condition ranks by, and why that list: the trace records both.

    A declared work type the frame does not list raises UnknownWorkType; a frame that names no work
    type ranks by default_classes and says so.
    """
    if condition.oracle:
        return (), "none: the oracle admits the ledger's MUST then SHOULD units"
    if condition.class_policy == "none":
        if condition.name.endswith("~query"):
            return (), f"none: work frame {work.establishment}, scoped query-only selection"
        return (), f"none: {condition.name} ranks without a class preference"
    if condition.class_policy == "default":
        return frame.default_classes, f"default_classes: {condition.name} ranks by the project default"
    if condition.class_policy == "merged":
        plausible = work.plausible_work_types or ((work.work_type,) if work.work_type else ())
        unlisted = [name for name in plausible if not frame.lists(name)]
        if unlisted:
            raise UnknownWorkType.of(frame, unlisted[0])
        return merged_order([frame.classes_for(name) for name in plausible]), (
            f"merged order of the plausible work types {', '.join(plausible)} "
            f"(work frame {work.establishment}; ranked by score, not by class)"
        )
    if work.work_type is None:
        return frame.default_classes, "default_classes: the work frame names no work type"
    if not frame.lists(work.work_type):
        raise UnknownWorkType.of(frame, work.work_type)
    soft = " (soft: neither excludes nor reorders)" if condition.flat_rank else ""
    return frame.classes_for(work.work_type), (
        f"work type {work.work_type}: its listed classes{soft}"
    )


def merged_order(lists: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """Round-robin over ordered class lists (best work type first), each class once: the first
    class of every list, then the second of every list, and so on."""
    merged: list[str] = []
    for depth in range(max((len(items) for items in lists), default=0)):
        for items in lists:
            if depth < len(items) and items[depth] not in merged:
                merged.append(items[depth])
    return tuple(merged)


def work_type_preferences(frame: ProjectFrame, work_type: str | None) -> tuple[str, ...]:
    """The work type's listed classes (default_classes when no work type is named); read by the
    goal-relevance signal only, so a unit's signals are comparable across conditions.
    """
    listed = frame.classes_for(work_type)
    return listed if listed else frame.default_classes


def apply_eligibility(
    candidates: Sequence[Working],
    *,
    index: CorpusIndex,
    condition: Condition,
    scope: frozenset[str],
    prefs: Sequence[str],
    standpoint: datetime | None,
    config: EngineConfig,
    budget_tokens: int,
    head: Mapping[int, int] | None = None,
) -> list[Working]:
    """Run every applicable rule on every candidate and record each; the first failure disposes of
    it. A unit of an inferred frame's query-only `head` (position -> query-only rank) passes the
    class rule whatever its class.
    """
    head = head or {}
    made: dict[tuple, EligibilityCheck] = {}

    def check(*fields) -> EligibilityCheck:  # frozen: one object per distinct check of this call
        found = made.get(fields)
        if found is None:
            found = made[fields] = EligibilityCheck(*fields)
        return found

    in_pool = {c.uid for c in candidates}
    scope_text = ",".join(sorted(scope))
    eligible: list[Working] = []
    for c in candidates:
        unit = c.unit
        checks: list[EligibilityCheck] = []
        if condition.scope_filter:
            ok = unit.project in scope
            checks.append(
                check(
                    "scope",
                    ok,
                    None if ok else ReasonCode.OUT_OF_PROJECT_SCOPE.value,
                    f"project {unit.project} {'in' if ok else 'outside'} scope "
                    f"{scope_text}",
                )
            )
        if condition.layers:
            superseded = superseded_as_of(unit, standpoint, index)
            available = [
                s
                for s in index.successors(unit.id)
                if s in in_pool and (not condition.scope_filter or index.unit(s).project in scope)
            ]
            ok = not (superseded and available)
            if ok:
                detail = (
                    "superseded, no successor available"
                    if superseded
                    else "current as of the standpoint"
                )
            else:
                detail = f"superseded by {','.join(available)}, a candidate"
            checks.append(
                check(
                    "supersession",
                    ok,
                    None if ok else ReasonCode.SUPERSEDED_SUCCESSOR_AVAILABLE.value,
                    detail,
                )
            )
        if condition.class_policy != "none":
            tier = preference_tier(unit.evidence_class, prefs)
            supported = c.retrieval_rank <= config.class_absent_query_rank
            if c.pos in head:
                checks.append(
                    check(
                        "class",
                        True,
                        None,
                        f"class {unit.evidence_class}; query-only head of the inferred frame's "
                        f"hedge (query-only rank {head[c.pos]})",
                    )
                )
            elif tier is not None:
                checks.append(
                    check(
                        "class", True, None, f"class {unit.evidence_class} at tier {tier}"
                    )
                )
            elif supported or not condition.hard_class_rule:
                why = (
                    f"query support: retrieval rank {c.retrieval_rank}"
                    if supported
                    else "retained: soft frame never excludes by class"
                )
                checks.append(
                    check(
                        "class", True, None, f"class {unit.evidence_class} not listed; {why}"
                    )
                )
            else:
                checks.append(
                    check(
                        "class",
                        False,
                        ReasonCode.CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE.value,
                        f"class {unit.evidence_class} not listed; "
                        f"retrieval rank {c.retrieval_rank} > {config.class_absent_query_rank}",
                    )
                )
        c.checks = checks
        failed = next((chk for chk in checks if not chk.passed), None)
        if failed is None:
            eligible.append(c)
        else:
            c.eligible = False
            c.stage = Stage.ELIGIBILITY.value
            c.reason = ReasonCode(failed.reason_code)
            c.budget = (0, budget_tokens)
    return eligible
