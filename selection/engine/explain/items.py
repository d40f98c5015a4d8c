"""Bundle items as the budget saw them, including the ones it omitted, re-rendered exactly."""

from __future__ import annotations

from collections.abc import Sequence

from ..outputs import CandidateRecord, ContextTrace
from ..reason_codes import CoalescingKind
from ..render import render_item
from ..types import Unit


def item_members(trace: ContextTrace) -> dict[str, list[CandidateRecord]]:
    """item id -> its members, the unit whose text it carries first, folded ones in fold order."""
    folded_order = {op.unit_id: i for i, op in enumerate(trace.coalescing) if op.op == CoalescingKind.FOLD_ECHO}
    members: dict[str, list[CandidateRecord]] = {}
    for c in trace.candidates:
        if c.item_id is not None and c.noted_on is None:
            members.setdefault(c.item_id, []).append(c)
    for item_id, group in members.items():
        group.sort(
            key=lambda c: (
                c.unit_id in folded_order,
                folded_order.get(c.unit_id, -1),
                f"item-{c.unit_id}" != item_id,
            )
        )
    return members


def render_trace_item(trace: ContextTrace, item_id: str, members: Sequence[CandidateRecord], unit: Unit) -> str:
    """Re-render an item (admitted or not) exactly as budget admission rendered it."""
    notes = tuple(
        op.note
        for op in trace.coalescing
        if op.op == CoalescingKind.SUPERSESSION_NOTE and op.item_id == item_id
    )
    return render_item(
        sources=[m.unit_id for m in members],
        evidence_class=unit.evidence_class,
        title=unit.title,
        text=unit.text,
        contradicts=tuple(sorted(unit.refutes)),
        notes=notes,
    )
