"""How the trace page lays out the candidate table: what a reader needs first, the rest on demand.

The unit, its disposition and its reason code lead (and stay in view while the table scrolls);
the decision's context follows, with the parts of the rank score; retrieval ranks, signals (each
with its part in the rank score, or why it has none) and eligibility rules (twenty-odd columns)
are shown only when the reader asks for them. The CSV export keeps every column.
"""

from __future__ import annotations

from dataclasses import dataclass

from .explain import COLUMNS, CandidateRow, Column, SignalPart

LEAD = ("unit", "disposition", "reason")
CONTEXT = (
    "label",
    "ecode",
    "stage",
    "cls",
    "project",
    "rank",
    "bucket",
    "rank_score",
    "contributions",
    "tokens",
    "budget",
    "pos",
)
_BY_KEY = {c.key: c for c in COLUMNS}
DETAIL = tuple(c.key for c in COLUMNS if c.key not in LEAD and c.key not in CONTEXT)

# text and a symbol for each disposition, so it never rests on colour alone
DISPOSITIONS = {
    "admitted": ("✓", "admitted"),
    "folded": ("⤵", "folded into another item"),
    "rejected": ("✗", "rejected"),
    "budget_omitted": ("⊘", "omitted: over budget"),
}


@dataclass(frozen=True)
class DisplayColumn:
    column: Column
    group: str  # lead | context | detail


def display_columns(*, details: bool) -> list[DisplayColumn]:
    groups = [("lead", LEAD), ("context", CONTEXT)] + ([("detail", DETAIL)] if details else [])
    return [DisplayColumn(_BY_KEY[key], group) for group, keys in groups for key in keys]


def disposition_display(disposition: str) -> tuple[str, str]:
    return DISPOSITIONS.get(disposition, ("•", disposition.replace("_", " ")))


def _text(value) -> str:
    if value is None or value == "":
        return "—"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def display_cells(row: CandidateRow, columns: list[DisplayColumn]) -> list[tuple[str, str, SignalPart | None]]:
    """(column key, text, signal part) in display order; the template gives unit, disposition,
    reason, label, E and each signal (value beside its part in the rank score) their own markup."""
    return [(c.column.key, _text(row.values[c.column.key]), row.parts.get(c.column.key)) for c in columns]
