"""Coalescing removes repetition and nothing else: echoes fold, dissent stays apart, supersession
becomes a note.
"""

from __future__ import annotations

from collections.abc import Sequence

from .index import CorpusIndex
from .outputs import CoalescingOp
from .policy import Working
from .reason_codes import CoalescingKind, ReasonCode


class DraftItem:
    """A bundle item before admission: the unit whose text it carries, plus folded members and
    notes.
    """

    __slots__ = ("primary", "members", "contradicts", "notes")

    def __init__(self, primary: Working):
        self.primary = primary
        self.members: list[Working] = [primary]
        self.contradicts: tuple[str, ...] = tuple(sorted(primary.unit.refutes))
        self.notes: list[str] = []

    @property
    def item_id(self) -> str:
        return f"item-{self.primary.uid}"

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(m.uid for m in self.members)


def one_item_each(ranked: Sequence[Working]) -> list[DraftItem]:
    """No coalescing (C0..C5, CO): every ranked candidate is its own item."""
    return [DraftItem(c) for c in ranked]


def _label(index: CorpusIndex, unit_id: str) -> str:
    unit = index.unit(unit_id)
    return (unit.title or unit.id) if unit is not None else unit_id


def coalesce(
    ranked: Sequence[Working], rejected: Sequence[Working], index: CorpusIndex
) -> tuple[list[DraftItem], list[CoalescingOp]]:
    """Fold restatements into the item they echo, keep refutations as their own items, and note
    supersession.

    An item keeps the rank position of the unit whose text it carries; folding never reorders.
    Every step is a CoalescingOp, so the pre-coalescing list is recoverable from the trace.
    """
    by_id = {c.uid: c for c in ranked}

    def root(c: Working) -> Working:
        # follow echo_of while the echoed unit is itself an eligible candidate; refutations never
        # fold
        seen = {c.uid}
        current = c
        while current.unit.echo_of and not current.unit.refutes:
            target = by_id.get(current.unit.echo_of)
            if target is None or target.uid in seen:
                break
            seen.add(target.uid)
            current = target
        return current

    items: dict[str, DraftItem] = {}
    order: list[str] = []
    roots = {c.uid: root(c) for c in ranked}
    for c in ranked:
        r = roots[c.uid]
        if r is c:
            items[c.uid] = DraftItem(c)
            order.append(c.uid)
    ops: list[CoalescingOp] = []
    for c in ranked:
        r = roots[c.uid]
        if r is c:
            continue
        item = items[r.uid]
        item.members.append(c)
        c.folded = True
        ops.append(
            CoalescingOp(
                CoalescingKind.FOLD_ECHO.value,
                c.uid,
                item.item_id,
                c.unit.echo_of,
                f"restates {c.unit.echo_of}",
            )
        )
    for uid in order:
        item = items[uid]
        for target in item.contradicts:
            ops.append(
                CoalescingOp(
                    CoalescingKind.PRESERVE_DISAGREEMENT.value,
                    uid,
                    item.item_id,
                    target,
                    f"contradicts {target}",
                )
            )
    item_of = {m.uid: items[roots[m.uid].uid] for m in ranked}
    for c in sorted(rejected, key=lambda w: w.uid):
        if c.reason is not ReasonCode.SUPERSEDED_SUCCESSOR_AVAILABLE:
            continue
        successors = [s for s in index.successors(c.uid) if s in item_of]
        if not successors:
            continue
        successor = successors[0]
        item = item_of[successor]
        note = f"{_label(index, c.uid)}, superseded by {_label(index, successor)}"
        item.notes.append(note)
        c.noted_on = item.item_id
        ops.append(
            CoalescingOp(
                CoalescingKind.SUPERSESSION_NOTE.value, c.uid, item.item_id, successor, note
            )
        )
    return [items[uid] for uid in order], ops


def undo_coalescing(
    item_sources: Sequence[Sequence[str]], ops: Sequence[CoalescingOp]
) -> list[tuple[str, ...]]:
    """Reverse the folding recorded in `ops`: one entry per unit that had its own passage before
    coalescing.

    Supersession notes are dropped (the noted unit was rejected at eligibility, never an item);
    disagreement items were never merged, so they come back unchanged.
    """
    folded = {
        op.unit_id
        for op in ops
        if op.op in (CoalescingKind.FOLD_ECHO, CoalescingKind.FOLD_NEAR_DUPLICATE)
    }
    out: list[tuple[str, ...]] = []
    for sources in item_sources:
        primary = [s for s in sources if s not in folded]
        out.append(tuple(primary))
        out.extend((s,) for s in sources if s in folded)
    return out
