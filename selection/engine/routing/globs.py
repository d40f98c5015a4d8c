"""The routing glob dialect: `*` and `?` within one segment, `**` only as a whole segment.

Paths and patterns are relative and use `/`; backslashes are normalised to `/`. Absolute paths
and `..` segments are refused: routing reads declared inputs, never the file system.
"""

from __future__ import annotations

import re
from functools import lru_cache


class RoutePathError(ValueError):
    """A path or pattern the dialect refuses; the message says which and why."""


def normalise(text: str, *, what: str = "path") -> str:
    """`a\\b/./c` -> `a/b/c`; raises RoutePathError for empty, absolute or `..` paths."""
    raw = text
    text = text.replace("\\", "/").strip()
    if not text:
        raise RoutePathError(f"{what} {raw!r} is empty")
    if text.startswith("/") or re.match(r"^[A-Za-z]:/", text) or text.startswith("~"):
        raise RoutePathError(f"{what} {raw!r} is absolute; routing paths are relative to the project root")
    segments = [s for s in text.split("/") if s not in ("", ".")]
    if ".." in segments:
        raise RoutePathError(f"{what} {raw!r} contains '..'; routing paths may not leave the project")
    if not segments:
        raise RoutePathError(f"{what} {raw!r} names no file")
    return "/".join(segments)


def normalise_pattern(pattern: str) -> str:
    """A valid pattern in normal form; `**` inside a segment (`a**`, `**.py`) is refused."""
    text = normalise(pattern, what="pattern")
    for segment in text.split("/"):
        if "**" in segment and segment != "**":
            raise RoutePathError(f"pattern {pattern!r}: '**' must be a whole segment (write '**/*.py', not '**.py')")
    return text


@lru_cache(maxsize=4096)
def _segment_regex(segment: str) -> re.Pattern[str]:
    out = []
    for ch in segment:
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out) + r"\Z")


def _match(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        # zero or more whole segments
        return any(_match(rest, path[i:]) for i in range(len(path) + 1))
    if not path:
        return False
    return bool(_segment_regex(head).match(path[0])) and _match(rest, path[1:])


def matches(pattern: str, path: str) -> bool:
    """Both in normal form (see normalise / normalise_pattern)."""
    return _match(tuple(pattern.split("/")), tuple(path.split("/")))
