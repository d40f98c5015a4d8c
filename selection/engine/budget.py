"""Budget admission: items are atomic, never truncated; each decision records the budget state it
saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .coalesce import DraftItem
from .reason_codes import ReasonCode, Stage
from .render import item_tokens, render_item


@dataclass
class Decided:
    draft: DraftItem
    rendered: str
    tokens: int
    admitted: bool


def render_draft(draft: DraftItem) -> str:
    unit = draft.primary.unit
    return render_item(
        sources=draft.sources,
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
) -> list[Decided]:
    """Greedy fill in rank order: an item that does not fit is omitted and later, smaller items may
    still fit.

    With `redundancy_threshold` (C6), an item whose carried unit has Jaccard above the threshold
    with a unit already admitted is rejected as a policy decision; refutations are exempt,
    since dissent is never removed as repetition. `spent` is what earlier admissions (the routed
    envelope) already took from the budget.
    """
    decided: list[Decided] = []
    admitted_rows: list[int] = []
    for draft in drafts:
        rendered = render_draft(draft)
        tokens = item_tokens(rendered)
        state = (spent, budget_tokens - spent)
        primary = draft.primary
        if redundancy_threshold is not None and jaccard is not None and row_of is not None:
            row = row_of[primary.pos]
            best = float(jaccard[row, admitted_rows].max()) if admitted_rows else 0.0
            primary.redundancy_admitted = round(best, 6)
            if best > redundancy_threshold and not primary.unit.refutes:
                _dispose(draft, ReasonCode.REDUNDANT_WITH_ADMITTED, Stage.BUDGET, state)
                decided.append(Decided(draft, rendered, tokens, False))
                continue
        if spent + tokens <= budget_tokens:
            spent += tokens
            _dispose(draft, admitted_reason, Stage.BUDGET, state)
            if row_of is not None:
                admitted_rows.extend(row_of[m.pos] for m in draft.members)
            decided.append(Decided(draft, rendered, tokens, True))
        else:
            _dispose(draft, ReasonCode.BUDGET_EXHAUSTED, Stage.BUDGET, state)
            decided.append(Decided(draft, rendered, tokens, False))
    return decided


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
