"""The manifest's `## MemoryCustodian Protocol` section, checked as the peer checks it.

`protocol_metadata(text)` returns the section's fields ({} for a manifest without the section:
the peer's routing before its Protocol), or raises ProtocolInvalid with the peer's message. The peer exits 2
on an INVALID manifest (`read`), which `ProtocolInvalid.exit_code` carries.
"""

from __future__ import annotations

import re
import uuid

from selection.corpus.custodian.markdown import headings, scan

SECTION = "memorycustodian protocol"
CURRENT = "0.8"
INVALID_EXIT = 2
# Protocol 0.8 requires these values exactly (the peer's contract gate)
REQUIRED = (
    ("entry_schema_version", "3"),
    ("subject_schema_version", "1"),
    ("subject_registry", "subjects.md"),
    ("routing_schema_version", "1"),
    ("conflict_schema_version", "1"),
    ("admission_policy", "evidence-required"),
    ("routing_policy", "explicit-task-and-scope"),
    ("conflict_policy", "canonical-subject-and-review"),
)
_BULLET = re.compile(r"^- ([^:]+):(.*)$")
_KEY = re.compile(r"[A-Za-z_]+")
_SETEXT = re.compile(r" {0,3}(?:=+|-+)[ \t]*")


class ProtocolInvalid(ValueError):
    exit_code = INVALID_EXIT

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


def _trace(text: str) -> bool:
    stripped = text.strip()
    return stripped.startswith("#") and stripped.lstrip("#").strip().strip("#").strip().casefold() == SECTION


def _version(value: str) -> tuple[int, ...] | None:
    parts = value.strip().split(".")
    return tuple(int(p) for p in parts) if parts and all(p.isdigit() for p in parts) else None


def _compare(left: tuple[int, ...], right: tuple[int, ...]) -> int:
    width = max(len(left), len(right))
    a, b = left + (0,) * (width - len(left)), right + (0,) * (width - len(right))
    return (a > b) - (a < b)


def valid_project_id(value: str | None) -> bool:
    try:
        parsed = uuid.UUID(value or "")
    except ValueError:
        return False
    return parsed.version == 4 and str(parsed) == (value or "").lower()


def protocol_metadata(text: str) -> tuple[dict[str, str], int | None]:
    """(fields, line of the heading); ({}, None) when the manifest has no Protocol section."""
    lines = scan(text)
    sections = [h for h in headings(lines) if h.level == 2 and h.title.casefold() == SECTION]
    visible = {line.number: line for line in lines if not (line.code or line.indented)}
    atx = sum(1 for line in visible.values() if _trace(line.text))
    indented = sum(1 for line in lines if line.indented and not line.code and _trace(line.text))
    setext = sum(
        1
        for line in visible.values()
        if line.text.strip().casefold() == SECTION
        and line.text.strip().casefold() == SECTION
        and line.number + 1 in visible
        and _SETEXT.fullmatch(visible[line.number + 1].text)
    )
    if not sections and not (atx or setext or indented):
        return {}, None
    if len(sections) != 1 or atx + setext != 1:
        where = sections[1].number if len(sections) > 1 else (sections[0].number if sections else None)
        raise ProtocolInvalid(
            "manifest.md must contain exactly one MemoryCustodian Protocol heading, "
            "written as an H2 with canonical whitespace",
            where,
        )
    start = sections[0].number
    end = next((h.number for h in headings(lines) if h.number > start and h.level <= 2), len(lines) + 1)
    fields: dict[str, str] = {}
    for line in lines[start : end - 1]:
        if line.code or line.indented or not line.text.strip():
            continue
        stripped = line.text.strip()
        match = _BULLET.fullmatch(stripped)
        if match is None:
            raise ProtocolInvalid(f"Malformed protocol metadata line: {stripped!r}", line.number)
        key, value = match.group(1).strip(), match.group(2).strip()
        if not _KEY.fullmatch(key):
            raise ProtocolInvalid(f"Malformed protocol metadata field: {key!r}", line.number)
        if key in fields:
            raise ProtocolInvalid(f"Duplicate protocol metadata field: {key}", line.number)
        if not value:
            raise ProtocolInvalid(f"Protocol metadata field {key} must not be empty", line.number)
        fields[key] = value
    return fields, start


def check_protocol(text: str) -> tuple[dict[str, str], int | None]:
    """The Protocol fields after the peer's version contract; ProtocolInvalid when it fails."""
    fields, line = protocol_metadata(text)
    if line is None:
        return {}, None
    version = fields.get("protocol_version")
    if not version:
        raise ProtocolInvalid("Protocol metadata section requires protocol_version", line)
    parsed = _version(version)
    if parsed is None:
        raise ProtocolInvalid(f"Invalid protocol version {version!r} in manifest.md", line)
    comparison = _compare(parsed, _version(CURRENT) or ())
    if comparison > 0:
        raise ProtocolInvalid(f"Project protocol {version} is newer than this CLI supports ({CURRENT})", line)
    if comparison < 0:
        return fields, line  # an older protocol: read as written (the peer offers a migration)
    if version != CURRENT:
        raise ProtocolInvalid(
            f"Protocol version equivalent to {CURRENT} must use the canonical value {CURRENT}; "
            f"manifest has {version!r}",
            line,
        )
    for key, expected in REQUIRED:
        if fields.get(key) != expected:
            raise ProtocolInvalid(
                f"Protocol {CURRENT} requires {key}: {expected}; manifest has {fields.get(key) or 'missing'}", line
            )
    for key in ("initialized_with", "last_migrated_with"):
        if not fields.get(key):
            raise ProtocolInvalid(f"Protocol {CURRENT} requires {key} metadata", line)
    if not valid_project_id(fields.get("project_id")):
        raise ProtocolInvalid(f"Protocol {CURRENT} requires a valid UUIDv4 project_id", line)
    return fields, line


def governed(fields: dict[str, str]) -> bool:
    """A manifest whose protocol has a Subject registry and controlled Facets (0.6 and later)."""
    parsed = _version(fields.get("protocol_version", "")) if fields else None
    return parsed is not None and _compare(parsed, (0, 6)) >= 0
