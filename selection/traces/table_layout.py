"""How the trace page lays out the candidate table: what a reader needs first, the rest on demand.

The unit, its disposition and its reason code lead (and stay in view while the table scrolls);
the decision's context follows, with the parts of the rank score; retrieval ranks, signals (each
with its part in the rank score, or why it has none) and eligibility rules (twenty-odd columns)
are shown only when the reader asks for them. The CSV export keeps every column.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import format_html
from django.utils.safestring import SafeString

from selection.traces.candidate_table import COLUMNS, CandidateRow, Column, SignalPart

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


def signal_cell(part: SignalPart) -> SafeString:
    """A signal's cell: its value, then its part of the rank score ("0.812 → +0.461") or, muted,
    the tag saying why it has none; the engine's note is the title. Built here, not in the
    template: a table of 200 candidates has 2,000 of them."""
    if part.contribution_text:
        after = format_html(
            ' <span aria-hidden="true">→</span><span class="visually-hidden"> contributes</span> <strong>{}</strong>',
            part.contribution_text,
        )
    elif part.tag:
        after = format_html(' <span class="sig-tag">{}</span>', part.tag)
    else:
        after = ""
    return format_html(
        '<td class="num sig sig-{}" data-signal="{}" title="{}">{}{}</td>',
        part.state,
        part.signal,
        part.explanation,
        part.value_text,
        after,
    )


def display_cells(row: CandidateRow, columns: list[DisplayColumn]) -> list[tuple[str, str, SafeString | None]]:
    """(column key, text, cell) in display order; a signal comes as its whole cell (`signal_cell`),
    and the template gives unit, disposition, reason, label and E their own markup."""
    cells = []
    for c in columns:
        key = c.column.key
        part = row.parts.get(key)
        cells.append((key, _text(row.values[key]), signal_cell(part) if part else None))
    return cells
