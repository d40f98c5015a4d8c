"""Near misses: candidates the budget alone omitted, what they cost, and what would have to give way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..outputs import ContextBundle, ContextTrace
from ..reason_codes import ReasonCode
from ..render import item_tokens
from ..types import Unit
from .items import item_members, render_trace_item


@dataclass(frozen=True)
class GiveWay:
    item_id: str
    sources: tuple[str, ...]
    tokens: int
    rank: int  # position of the item in the bundle, 1-based


@dataclass(frozen=True)
class NearMiss:
    """A candidate rejected only by the budget, what it costs, and what would have to give way."""

    unit_id: str
    item_id: str
    sources: tuple[str, ...]
    rank: int | None
    tokens: int  # the rendered item's cost
    remaining_at_decision: int
    free_at_end: int
    deficit: int  # tokens that must be freed to admit it after the fact
    give_way: tuple[GiveWay, ...]  # the lowest-ranked admitted items whose removal frees enough
    fits_at_all: bool  # False when the item alone exceeds the whole budget


def near_misses(trace: ContextTrace, bundle: ContextBundle, units: Mapping[str, Unit]) -> tuple[NearMiss, ...]:
    """Every item omitted for lack of budget (BUDGET_EXHAUSTED), cheapest deficit first.

    `units` maps unit id -> Unit for at least the omitted items' primary units.
    """
    members = item_members(trace)
    spent = sum(item.tokens for item in bundle.items)
    free = trace.budget_tokens - spent
    out = []
    for item_id, group in members.items():
        primary = group[0]
        if primary.reason_code != ReasonCode.BUDGET_EXHAUSTED or primary.unit_id not in units:
            continue
        cost = item_tokens(render_trace_item(trace, item_id, group, units[primary.unit_id]))
        deficit = max(cost - free, 0)
        give: list[GiveWay] = []
        freed = 0
        fits = cost <= trace.budget_tokens
        if fits:
            for rank in range(len(bundle.items), 0, -1):
                if freed >= deficit:
                    break
                item = bundle.items[rank - 1]
                give.append(GiveWay(item.item_id, item.sources, item.tokens, rank))
                freed += item.tokens
        out.append(
            NearMiss(
                primary.unit_id,
                item_id,
                tuple(m.unit_id for m in group),
                primary.rank,
                cost,
                primary.budget.remaining,
                free,
                deficit,
                tuple(give),
                fits,
            )
        )
    out.sort(key=lambda n: (not n.fits_at_all, n.deficit, n.rank or 0, n.unit_id))
    return tuple(out)
