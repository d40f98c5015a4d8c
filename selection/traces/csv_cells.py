"""CSV cells a spreadsheet opens as text: a cell that would start a formula is quoted with '.

Stored text (a query, a unit id, a reason) is written by users and corpora; a spreadsheet would run
"=HYPERLINK(...)" or "@SUM(...)" from an export (CSV injection). Numbers stay numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralised(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(values: Iterable[Any]) -> list[Any]:
    return [neutralised(value) for value in values]
