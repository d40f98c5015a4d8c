"""Budget admission: items are atomic, never truncated; each decision records the budget state it
saw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .coalesce import DraftItem
from .outputs import CoalescingOp
from .ranking import evidence, pulled
from .reason_codes import CoalescingKind, ReasonCode, Stage
from .render import item_tokens, render_item
from .types import DEFAULT_UNLISTED_FLOOR, AdmissionPolicy


@dataclass
class Decided:
    draft: DraftItem
    rendered: str
    tokens: int
    admitted: bool


def render_draft(draft: DraftItem, sources: tuple[str, ...] | None = None) -> str:
    unit = draft.primary.unit
    return render_item(
        sources=draft.sources if sources is None else sources,
        evidence_class=unit.evidence_class,
        title=unit.title,
        text=unit.text,
        contradicts=draft.contradicts,
        notes=draft.notes,
    )


def admit_within_budget(
    drafts: Sequence[DraftItem],
    *,
    budget_tokens: int,
    admitted_reason: ReasonCode = ReasonCode.ADMITTED_WITHIN_BUDGET,
    redundancy_threshold: float | None = None,
    jaccard: np.ndarray | None = None,
    row_of: dict[int, int] | None = None,
    spent: int = 0,
    stop: AdmissionPolicy | None = None,
    unlisted_bucket: int | None = None,
    contested: frozenset[str] = frozenset(),
    ops: list[CoalescingOp] | None = None,
    objective_ran: bool = True,
) -> list[Decided]:
    """Greedy fill in rank order: an item that does not fit is omitted and later, smaller items may
    still fit.

    With `redundancy_threshold` (C6), an item whose carried unit has Jaccard above the threshold
    with a unit already admitted is a near-duplicate: it folds into that unit's item (its ids join
    the sources, like an echo; recorded in `ops`), or, when the longer source list would not fit,
    it is rejected as redundant. A unit in `contested` (it refutes or is refuted) never folds and
    is never rejected as repetition: dissent is not repetition. Then the frame's stop rule
    (`stop`) may stop the item (`objective_ran`: whether an objective query ran, which the
    unlisted floor reads). `spent` is what earlier admissions (the routed envelope) already
    took from the budget.
    """
    decided: list[Decided] = []
    admitted_rows: list[int] = []
    owner: dict[int, int] = {}  # admitted row -> index in `decided` of the item holding it
    rule = _StopRule(stop, unlisted_bucket, objective_ran)
    for draft in drafts:
        rendered = render_draft(draft)
        tokens = item_tokens(rendered)
        state = (spent, budget_tokens - spent)
        primary = draft.primary
        if redundancy_threshold is not None and jaccard is not None and row_of is not None:
            row = row_of[primary.pos]
            best = float(jaccard[row, admitted_rows].max()) if admitted_rows else 0.0
            primary.redundancy_admitted = round(best, 6)
            exempt = primary.unit.refutes or primary.uid in contested
            if best > redundancy_threshold and not exempt:
                twin = admitted_rows[int(np.argmax(jaccard[row, admitted_rows]))]
                target = decided[owner[twin]]
                grown = target.draft.sources + draft.sources
                regrown = render_draft(target.draft, sources=grown)
                cost = item_tokens(regrown) - target.tokens
                if spent + cost <= budget_tokens:
                    spent += cost
                    target.draft.members.extend(draft.members)
                    target.rendered, target.tokens = regrown, target.tokens + cost
                    for m in draft.members:
                        owner[row_of[m.pos]] = owner[twin]
                        admitted_rows.append(row_of[m.pos])
                        m.budget, m.item_id = state, target.draft.item_id
                        m.stage, m.reason = Stage.COALESCING.value, ReasonCode.NEAR_DUPLICATE_FOLDED
                        if ops is not None:
                            ops.append(
                                CoalescingOp(
                                    CoalescingKind.FOLD_NEAR_DUPLICATE.value,
                                    m.uid,
                                    target.draft.item_id,
                                    target.draft.primary.uid,
                                    f"near-restates {target.draft.primary.uid} (Jaccard {best:.2f})",
                                )
                            )
                    decided.append(Decided(draft, rendered, tokens, False))
                    continue
                _dispose(draft, ReasonCode.REDUNDANT_WITH_ADMITTED, Stage.BUDGET, state)
                decided.append(Decided(draft, rendered, tokens, False))
                continue
        why = rule.stops(primary)
        if why:
            primary.stop_note = why
            _dispose(draft, ReasonCode.ADMISSION_STOPPED, Stage.BUDGET, state)
            decided.append(Decided(draft, rendered, tokens, False))
            continue
        if spent + tokens <= budget_tokens:
            spent += tokens
            rule.admitted(primary)
            _dispose(draft, admitted_reason, Stage.BUDGET, state)
            if row_of is not None:
                for m in draft.members:
                    owner[row_of[m.pos]] = len(decided)
                    admitted_rows.append(row_of[m.pos])
            decided.append(Decided(draft, rendered, tokens, True))
        else:
            _dispose(draft, ReasonCode.BUDGET_EXHAUSTED, Stage.BUDGET, state)
            decided.append(Decided(draft, rendered, tokens, False))
    return decided


class _StopRule:
    """The frame's admission stop rule (AdmissionPolicy), applied item by item in rank order."""

    def __init__(
        self, policy: AdmissionPolicy | None, unlisted_bucket: int | None, objective_ran: bool = True
    ):
        self.policy = policy if policy is not None and policy.rule != "none" else None
        self.unlisted_bucket = unlisted_bucket
        self.objective_ran = objective_ran
        self.best: dict[int, float] = {}
        self.count: dict[int, int] = {}
        self.pulled: set[int] = set()  # buckets whose first class-pulled unit has been seen

    def stops(self, c) -> str:
        """Why the rule stops this candidate, or "" when it may be admitted."""
        if self.policy is None or c.bucket is None:
            return ""
        bucket = c.bucket
        if self.policy.rule == "unlisted":
            floor = self.policy.unlisted_floor
            return self.unlisted_floor(c, DEFAULT_UNLISTED_FLOOR if floor is None else floor)
        if bucket == self.unlisted_bucket and self.count.get(bucket, 0) >= self.policy.unlisted:
            return f"unlisted-class bucket already holds {self.policy.unlisted} admitted items"
        if self.policy.unlisted_floor is not None:
            why = self.unlisted_floor(c, self.policy.unlisted_floor)
            if why:
                return why
        guaranteed = False
        if pulled(c, "class_pull") and bucket not in self.pulled:
            # the frame guarantees its preferred classes candidates: the first one pulled for a
            # class is that guarantee, and weak retrieval evidence does not withdraw it
            self.pulled.add(bucket)
            guaranteed = True
        cap = self.tier_cap(bucket)
        if cap is not None and self.count.get(bucket, 0) >= cap:
            return (
                f"bucket of tier {bucket} already holds {cap} admitted items "
                f"(tier cap {self.policy.tier_cap}: ceil({self.policy.tier_cap} / {bucket + 1}))"
            )
        best = self.best.get(bucket)
        mine = evidence(c)
        if best is not None and not guaranteed and mine < self.policy.floor * best:
            return (
                f"evidence {mine:.3f} < {self.policy.floor:g} x {best:.3f}, the best admitted in "
                f"bucket {bucket}"
            )
        return ""

    def unlisted_floor(self, c, floor: float) -> str:
        """Why the unlisted floor stops `c` ("" when it does not): only an item of the unlisted
        bucket is read; the note names the engine default when the frame declared no rule."""
        if c.bucket != self.unlisted_bucket:
            return ""
        support, what = self.agreement(c)
        if support >= floor:
            return ""
        origin = ""
        if self.policy.origin != "frame":
            origin = f"; the {self.policy.origin} stop rule, the frame declares no admission"
        return (
            f"unlisted class: {what} {support:.3f} < {floor:g} (a class the work type does not "
            f"list enters only on strong support{origin})"
        )

    def agreement(self, c) -> tuple[float, str]:
        """How strongly both texts support a candidate: the weaker of its query and objective
        relevance, or its query relevance alone when no objective query ran."""
        s = c.signals
        if not self.objective_ran:
            return s.get("query_relevance", 0.0), "query relevance"
        return (
            min(s.get("query_relevance", 0.0), s.get("objective_relevance", 0.0)),
            "min(query, objective relevance)",
        )

    def tier_cap(self, bucket: int) -> int | None:
        """How many items the bucket of this preference tier admits at most (None: no cap); the
        unlisted bucket and an inferred frame's query-only head (-1) have their own rules."""
        if self.policy.tier_cap is None or bucket < 0 or bucket == self.unlisted_bucket:
            return None
        return math.ceil(self.policy.tier_cap / (bucket + 1))

    def admitted(self, c) -> None:
        if self.policy is None or c.bucket is None:
            return
        self.best[c.bucket] = max(self.best.get(c.bucket, 0.0), evidence(c))
        self.count[c.bucket] = self.count.get(c.bucket, 0) + 1


def _dispose(draft: DraftItem, reason: ReasonCode, stage: Stage, state: tuple[int, int]) -> None:
    for member in draft.members:
        member.budget = state
        member.item_id = draft.item_id
        member.stage = stage.value
        if member.folded and reason in (
            ReasonCode.ADMITTED_WITHIN_BUDGET,
            ReasonCode.ORACLE_LEDGER,
        ):
            member.reason = ReasonCode.ECHO_FOLDED_INTO_ITEM
            member.stage = Stage.COALESCING.value
        else:
            member.reason = reason
