"""One H2 section of a memory file read as the peer's entry grammar.

`## <ID> — <title>` (an em dash) opens an entry; its column-zero `Key:` lines are fields
(`Status`, `Scope`, `Subject`, `Facet`, `Evidence`, ...); a field with no value followed by `- item`
lines is a list (`Evidence:`, `Aliases:`, `Entries:`); the other fields (`Decision:`, `Reason:`,
`Statement:` ...) are the typed body. A typed body may be one fenced block (the peer's body-v1
fence): its lines are body, never fields. Any other H2 (`## 2026-07-21 - Use MemoryCustodian`,
`## Tombstone: ...`, a changelog date) is a plain section, kept whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from selection.corpus.custodian.markdown import scan

ENTRY_HEADING = re.compile(r"^## +(?P<id>[A-Za-z0-9][A-Za-z0-9_.-]*) +— +(?P<title>\S.*?)\s*$")
PEER_ID = re.compile(r"^MC-(DEC|CON|DNU|PREF|AREA|INBOX|TOMB|SUBJ|REC)-\d{8}-[0-9a-f]{8}$", re.I)
LOOKS_LIKE_ID = re.compile(r"^## +MC-[A-Za-z]+-\S+")
FIELD = re.compile(r"^(?P<key>[A-Za-z][A-Za-z-]*):(?:[ \t]*(?P<value>.*))?$")
# fields that describe the entry; every other `Key:` line starts a part of the typed body
META = (
    "Status",
    "Scope",
    "Subject",
    "Facet",
    "Evidence",
    "Supersedes",
    "Superseded-By",
    "Kind",
    "Canonical-Ref",
    "Aliases",
    "Entry-Type",
    "Exception-To",
    "Candidate-Type",
    "Provisional-Subject",
    "Provisional-Facet",
    "Promoted-From",
    "Promoted-To",
    "Merged-Into",
    "Resolution",
    "Entries",
    "Date",
)
LISTS = ("Evidence", "Aliases", "Entries", "Supersedes")
STATUSES = ("active", "superseded", "candidate", "promoted", "merged", "declined")
FACETS = (
    "adoption-policy",
    "version-policy",
    "architecture",
    "behavior",
    "compatibility",
    "security",
    "performance",
    "data-model",
    "interface",
    "workflow",
    "lifecycle",
)
ENTRY_TYPES = ("decision", "constraint", "rejected", "preference", "rule", "profile")
_SCOPE = re.compile(r"^(?:project|area:[A-Za-z0-9][A-Za-z0-9._-]*|local-user|local-machine)$")


@dataclass
class Entry:
    entry_id: str  # as written: case kept
    title: str
    line: int
    fields: dict[str, str] = field(default_factory=dict)  # first value of each field
    counts: dict[str, int] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)
    field_lines: dict[str, int] = field(default_factory=dict)
    body: list[str] = field(default_factory=list)  # the typed body lines, as written
    fences: list[str] = field(default_factory=list)  # info strings of fenced body blocks
    problems: list[tuple[int, str]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.fields.get("Status", "active").strip().lower() or "active"

    @property
    def scope(self) -> str:
        return self.fields.get("Scope", "").strip()

    @property
    def evidence(self) -> list[str]:
        return self.lists.get("Evidence") or ([self.fields["Evidence"]] if self.fields.get("Evidence") else [])

    @property
    def peer(self) -> bool:
        return PEER_ID.match(self.entry_id) is not None

    @property
    def type_code(self) -> str:
        return self.entry_id.split("-", 2)[1].upper() if self.peer else ""

    def text(self) -> str:
        """The unit text: the typed body as written, then the evidence."""
        text = "\n".join(self.body).strip()
        if self.evidence:
            text = f"{text}\nEvidence: {', '.join(self.evidence)}".strip()
        return text


def parse_entry(raw: str, first_line: int) -> Entry | None:
    """The entry of an H2 section (None: a plain section); problems hold what is refused."""
    lines = scan(raw)
    heading = ENTRY_HEADING.match(lines[0].text) if lines else None
    if heading is None:
        return None
    entry = Entry(heading["id"], heading["title"], first_line)
    current: str | None = None  # the field whose value or list the next lines continue
    in_body = False
    for line in lines[1:]:
        number = first_line + line.number - 1
        if line.code:
            if line.fence and current is not None and current not in META:
                entry.fences.append(line.fence)
            entry.body.append(line.text)
            continue
        match = FIELD.match(line.text)
        if match is not None:
            key, value = match["key"], (match["value"] or "").strip()
            entry.counts[key] = entry.counts.get(key, 0) + 1
            if key in META and not in_body:
                if key in entry.fields and entry.counts[key] > 1:
                    entry.problems.append((number, f'"{key}" is given twice for {entry.entry_id}'))
                entry.fields.setdefault(key, value)
                entry.field_lines.setdefault(key, number)
                if not value and key in LISTS:
                    entry.lists.setdefault(key, [])
                current = key
                continue
            in_body = True
            current = key
            entry.body.append(line.text)
            continue
        if current in LISTS and not in_body and line.text.startswith("- "):
            entry.lists.setdefault(current, []).append(line.text[2:].strip())
            continue
        if not line.text.strip():
            if not in_body:
                current = None if current in META else current
            else:
                entry.body.append(line.text)
            continue
        in_body = True
        entry.body.append(line.text)
    _check(entry)
    return entry


def _check(entry: Entry) -> None:
    status = entry.status
    at = entry.field_lines.get("Status", entry.line)
    if status not in STATUSES:
        entry.problems.append((at, f'status "{entry.fields["Status"]}" is not one of {", ".join(STATUSES)}'))
    kind = entry.fields.get("Entry-Type", "").strip().lower()
    if kind and kind not in ENTRY_TYPES:
        entry.problems.append(
            (entry.field_lines["Entry-Type"], f'Entry-Type "{kind}" is not one of {", ".join(ENTRY_TYPES)}')
        )


def scope_problem(entry: Entry) -> tuple[int, str] | None:
    """A Scope the peer's protocol refuses (only `project`, `area:<slug>`, `local-user`, `local-machine`)."""
    scope = entry.scope
    if scope and not _SCOPE.match(scope):
        return entry.field_lines["Scope"], f"Invalid Scope: {scope!r}"
    return None


def looks_like_entry(heading_line: str) -> bool:
    """An H2 that names a peer-style id but is not `## <ID> — <title>` (an em dash is missing)."""
    return LOOKS_LIKE_ID.match(heading_line) is not None and ENTRY_HEADING.match(heading_line) is None


def normalise_alias(value: str) -> str:
    return re.sub(r"\s+", " ", value.strip()).casefold()


def normalise_canonical_ref(value: str) -> str:
    ref = value.strip().casefold()
    if not re.fullmatch(r"[a-z][a-z0-9-]*:[^\s]+", ref):
        raise ValueError(f"Canonical-Ref {value!r} is not a kind:value reference")
    return ref
