"""Where a value sits in a corpus file, and the checks that report against that place."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from selection.corpus.issues import CorpusIssue
from selection.corpus.limits import MAX_INTEGER, MAX_NUMBER, MAX_YEAR, MIN_YEAR, NUMBER_RANGE

PathPart = str | int
IDENTIFIER = re.compile(r"[a-z0-9][a-z0-9_.-]*")
# what a name that breaks IDENTIFIER is told
NAME_RULE = (
    'is not a valid name: use lower-case letters, digits, "-", "_" and ".", '
    'starting with a letter or digit (such as "design-review")'
)
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
# ISO 8601 date and time, extended or basic form; the zone is checked separately so that a
# naive time gets its own message
_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}([.,]\d+)?)?"
    r"|\d{8}[Tt]\d{4}(\d{2}([.,]\d+)?)?)"
    r"(?P<zone>[Zz]|[+-]\d{2}(:?\d{2})?)?"
)
_EXAMPLE_TIME = "2026-09-20T16:33:14Z"
_EXTENSION_RULE = 'keys starting with "x-" are kept and ignored'
_DATE = re.compile(r"\d{4}-?\d{2}-?\d{2}")


def format_path(path: tuple[PathPart, ...]) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text or "top level"


@dataclass(frozen=True)
class Place:
    """A value's place: a YAML path (with the document's node lines) or a units.jsonl line."""

    file: str
    path: tuple[PathPart, ...] = ()
    lines: Mapping[tuple[PathPart, ...], int] | None = None  # YAML only
    line: int | None = None  # units.jsonl only

    def at(self, *parts: PathPart) -> Place:
        return Place(self.file, self.path + parts, self.lines, self.line)

    @property
    def location(self) -> str:
        if self.line is not None:
            return f"line {self.line}"
        return f"{format_path(self.path)} (line {self.yaml_line})"

    @property
    def yaml_line(self) -> int:
        # a path the file does not hold (a missing key, a value merged from elsewhere) takes the
        # line of its nearest ancestor that it does hold
        lines = self.lines or {}
        for end in range(len(self.path), -1, -1):
            if self.path[:end] in lines:
                return lines[self.path[:end]]
        return 1

    @property
    def field(self) -> str:
        names = [part for part in self.path if isinstance(part, str)]
        if self.line is not None:
            return ".".join(names)
        return names[-1] if names else ""


class Unreadable:
    """Stands in for names a file held but could not be read for: every name counts as present, so
    one unreadable file does not turn into an issue for each reference to it."""

    def __contains__(self, name: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


class Report:
    """Collects issues; checks return the checked value, or None after reporting why not."""

    def __init__(self) -> None:
        self.issues: list[CorpusIssue] = []

    def add(self, place: Place, message: str, field: str | None = None) -> None:
        self.issues.append(
            CorpusIssue(
                place.file, place.location, place.field if field is None else field, message
            )
        )

    def add_file(self, file: str, location: str, message: str) -> None:
        self.issues.append(CorpusIssue(file, location, "", message))

    def __len__(self) -> int:
        return len(self.issues)

    # --- structural checks -------------------------------------------------------------------

    def mapping(
        self,
        value: Any,
        place: Place,
        *,
        required: Iterable[str] = (),
        optional: Iterable[str] = (),
        unknown_hint: Callable[[str], str | None] | None = None,
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """A mapping with known keys; returns (known keys, "x-" keys), both in file order."""
        if not isinstance(value, dict):
            self.add(place, f"expected a mapping, got {describe(value)}")
            return None, {}
        required = tuple(required)
        allowed = set(required) | set(optional)
        known: dict[str, Any] = {}
        extras: dict[str, Any] = {}
        for key, item in value.items():
            if key.startswith("x-"):
                extras[key] = item
            elif key in allowed:
                known[key] = item
            else:
                hint = unknown_hint(key) if unknown_hint else None
                message = f'unknown key "{key}"'
                message += (
                    f": {hint}"
                    if hint
                    else f" (allowed: {', '.join(sorted(allowed))}; {_EXTENSION_RULE})"
                )
                self.add(place.at(key), message)
        for key in required:
            if key not in value:
                self.add(place, f'required key "{key}" is missing', field=place.at(key).field)
        return known, extras

    def string(self, value: Any, place: Place, *, nonempty: bool = False) -> str | None:
        if not isinstance(value, str):
            self.add(place, f"expected a string, got {describe(value)}")
            return None
        if nonempty and not value.strip():
            self.add(place, "must not be empty")
            return None
        return value

    def identifier(self, value: Any, place: Place, what: str = "identifier") -> str | None:
        if not isinstance(value, str):
            self.add(place, f"expected a {what} (a string), got {describe(value)}")
            return None
        if not IDENTIFIER.fullmatch(value):
            self.add(place, f'{what} "{value}" {NAME_RULE}')
            return None
        return value

    def project(self, value: Any, place: Place, declared: Collection[str]) -> str | None:
        """A project slug, reported when corpus.yaml does not declare it (and returned all the same)."""
        project = self.identifier(value, place, "project slug")
        if project is not None and project not in declared:
            self.add(place, f'project "{project}" is not declared in corpus.yaml')
        return project

    def items(self, value: Any, place: Place) -> list[tuple[Place, Any]] | None:
        if not isinstance(value, list):
            self.add(place, f"expected a list, got {describe(value)}")
            return None
        return [(place.at(index), item) for index, item in enumerate(value)]

    def string_list(self, value: Any, place: Place) -> tuple[str, ...] | None:
        entries = self.items(value, place)
        if entries is None:
            return None
        checked = [self.string(item, at) for at, item in entries]
        return None if any(item is None for item in checked) else tuple(checked)  # type: ignore[arg-type]

    def identifier_list(
        self, value: Any, place: Place, what: str = "identifier"
    ) -> tuple[str, ...] | None:
        entries = self.items(value, place)
        if entries is None:
            return None
        checked = [self.identifier(item, at, what) for at, item in entries]
        return None if any(item is None for item in checked) else tuple(checked)  # type: ignore[arg-type]

    def integer(
        self,
        value: Any,
        place: Place,
        *,
        minimum: int | None = None,
        maximum: int = MAX_INTEGER,
    ) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(place, f"expected an integer, got {describe(value)}")
            return None
        if minimum is not None and value < minimum:
            self.add(place, f"must be at least {minimum}, got {value}")
            return None
        if value > maximum:
            self.add(place, f"must be at most {maximum}, got {value}")
            return None
        return value

    def number(self, value: Any, place: Place) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.add(place, f"expected a number such as 0.6, got {describe(value)}")
            return None
        if not math.isfinite(value):
            self.add(place, f"{value} is not a finite number: give an ordinary number such as 0.6")
            return None
        if abs(value) > MAX_NUMBER:
            shown = f"{value:g}" if isinstance(value, float) else "with more digits than allowed"
            self.add(place, f"the number {shown} is out of range: {NUMBER_RANGE}")
            return None
        return float(value)

    def boolean(self, value: Any, place: Place) -> bool | None:
        if not isinstance(value, bool):
            self.add(place, f"expected true or false, got {describe(value)}")
            return None
        return value

    def choice(self, value: Any, place: Place, choices: tuple[str, ...]) -> str | None:
        if not isinstance(value, str) or value not in choices:
            self.add(place, f"{describe(value)} is not one of: {', '.join(choices)}")
            return None
        return value

    def time(self, value: Any, place: Place) -> datetime | None:
        """ISO 8601 with a zone; a naive time is refused, never guessed to be UTC."""
        if not isinstance(value, str):
            self.add(
                place,
                f"expected an ISO 8601 time with a zone ({_EXAMPLE_TIME}), got {describe(value)}",
            )
            return None
        match = _TIME.fullmatch(value.strip())
        if not match and _DATE.fullmatch(value.strip()):
            self.add(
                place,
                f'"{value}" is a date; a time needs a time of day and a zone ({_EXAMPLE_TIME})',
            )
            return None
        if not match:
            self.add(place, f'"{value}" is not an ISO 8601 time with a zone (2026-09-20T16:33:14Z)')
            return None
        if match.group("zone") is None:
            self.add(
                place,
                f'time "{value}" has no zone; write UTC with "Z" or an offset like "+02:00"',
            )
            return None
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError as error:
            self.add(place, f'"{value}" is not a valid time: {error}')
            return None
        if not MIN_YEAR <= moment.year <= MAX_YEAR:
            self.add(place, f'"{value}" is out of range: times fall in {MIN_YEAR}..{MAX_YEAR}')
            return None
        return moment


def describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) > MAX_NUMBER:
        return "a number out of range"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f'"{shown}"'
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
