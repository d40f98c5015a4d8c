"""The corpus format's size, depth and value limits: what no importer holds in memory or stores.

Documented in docs/corpus-format.md ("Limits"); every limit is reported as an ordinary corpus issue
(file, line or YAML path, field), so a hostile or broken corpus imports nothing and crashes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

MAX_YAML_BYTES = 8 * 1024 * 1024  # corpus.yaml, tasks.yaml, proposals.yaml, each
MAX_JSONL_BYTES = 512 * 1024 * 1024  # units.jsonl
MAX_LINE_BYTES = 1024 * 1024  # one units.jsonl line
MAX_DEPTH = 32  # nested mappings and lists, in YAML and in JSON
MAX_YAML_VALUES = 200_000  # values in one YAML file once aliases are expanded
MAX_INTEGER = 2**31 - 1  # integer fields: a PostgreSQL integer column holds them
MAX_NUMBER = 2**53  # any number anywhere (extensions too): exact in JSON everywhere
# what an out-of-range number is told, in the user's words
NUMBER_RANGE = f"a number must lie between -{MAX_NUMBER:,} and {MAX_NUMBER:,}"
MIN_YEAR, MAX_YEAR = 1000, 9998  # times: an offset can never carry one past what a column holds
MAX_PATCH_BYTES = 64 * 1024  # a proposal's merge patch, as JSON


def string_problem(text: str) -> str | None:
    """Why a string cannot be stored as PostgreSQL text (or UTF-8 at all), or None."""
    if "\x00" in text:
        return "holds a NUL character (\\u0000), which text cannot store"
    for char in text:
        if "\ud800" <= char <= "\udfff":
            return f"holds a lone surrogate (\\u{ord(char):04x}), which is not Unicode text"
    return None


def value_problems(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple, str]]:
    """(path, problem) for each string, number or key no field may hold, wherever it sits."""
    if isinstance(value, str):
        problem = string_problem(value)
        if problem:
            yield path, problem
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if abs(value) > MAX_NUMBER:
            yield path, f"the number {_short(value)} is out of range: {NUMBER_RANGE}"
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield path, f"{value} is not a finite number: give an ordinary number such as 0.6"
        elif abs(value) > MAX_NUMBER:
            yield path, f"the number {value:g} is out of range: {NUMBER_RANGE}"
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                problem = string_problem(key)
                if problem:
                    yield path + (key.encode("utf-8", "backslashreplace").decode(),), ("a key " + problem)
                    continue
            yield from value_problems(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from value_problems(item, path + (index,))


def depth(value: Any) -> int:
    """Levels of nested mappings and lists (a scalar is 0), without recursion."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
            deepest = max(deepest, level + 1)
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
            deepest = max(deepest, level + 1)
    return deepest


def _short(number: int) -> str:
    text = str(number) if number.bit_length() < 4000 else "with more than 1200 digits"
    return text if len(text) <= 30 else text[:12] + "…" + text[-6:]


def printable(text: str) -> str:
    """A string safe to put in a message: surrogates and NULs escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\u0000")
