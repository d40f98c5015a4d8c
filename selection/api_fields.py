"""Field types the API's schemas share: text PostgreSQL can store (no NUL byte), bounded ids.

A NUL byte reaching the database would fail the query (and, inside a transaction, every query
after it); refusing it while parsing makes it a 422 that names the field.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field


def _storable(value: str) -> str:
    if "\x00" in value:
        raise ValueError("text may not contain a NUL (\\u0000) character")
    return value


Text = Annotated[str, AfterValidator(_storable)]
MAX_TEXT = 20_000  # the longest free text a request may carry (a query, a note)
# a database integer key or version number: PostgreSQL's integer range, so no lookup overflows
Id = Annotated[int, Field(ge=0, le=2_147_483_647)]


def _storable_json(value: Any) -> Any:
    # PostgreSQL's jsonb refuses \u0000 in keys and strings alike
    if isinstance(value, str):
        return _storable(value)
    if isinstance(value, dict):
        for key, item in value.items():
            _storable(str(key))
            _storable_json(item)
    elif isinstance(value, list):
        for item in value:
            _storable_json(item)
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_storable_json)]
