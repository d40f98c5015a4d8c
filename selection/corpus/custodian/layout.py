"""The files under docs/memory as read: what each one holds, kept so an export writes it back.

`read_tree(root)` lists every Markdown file under docs/memory (sorted) with its text and its
segments. `file_units` turns one module file into unit objects: an entry (`## <ID> — <title>`) is
a unit with its id lower-cased; a plain section (any other H2) is a unit `<module>.unit-<n>`; a
file without H2 sections is one unit named after the file, or none when it holds nothing (an
emptied file after a hard forget). Each unit's `x-mc` extras keep the raw section, so the export
(custodian/export.py) writes unchanged units back byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selection.corpus.custodian.entries import Entry, looks_like_entry, parse_entry
from selection.corpus.custodian.markdown import Segment, segments

MC = "x-mc"  # a unit's extras: what the peer wrote, for export and for the peer's own identity
LAYOUT = "x-memory-layout"  # corpus extras: every file as parts, raw text or unit ids
_IDENT = re.compile(r"[a-z0-9][a-z0-9_.-]*")


@dataclass
class TreeFile:
    path: str  # relative to docs/memory, POSIX
    text: str
    segments: list[Segment] = field(default_factory=list)


@dataclass
class FileRead:
    units: list[dict[str, Any]] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    parts: list[dict[str, str]] = field(default_factory=list)  # {"raw": ...} or {"unit": id}
    problems: list[tuple[int | None, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_tree(memory: Path) -> tuple[list[TreeFile], list[tuple[str, str]]]:
    """(the Markdown files, (file, problem) for each one the reader refuses: a symlink, not UTF-8)."""
    files, problems = [], []
    for path in sorted(memory.rglob("*.md"), key=lambda p: p.relative_to(memory).as_posix()):
        relative = path.relative_to(memory).as_posix()
        if path.is_symlink():
            problems.append((relative, "a managed memory path must not be a symlink (not followed)"))
            continue
        if not path.is_file():
            continue
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as error:
            problems.append((relative, f"is not UTF-8 text (byte {error.start})"))
            continue
        files.append(TreeFile(relative, text, segments(text)))
    return files, problems


def module_unit_id(name: str) -> str:
    return name.lower().replace("/", ".")


def file_units(tree_file: TreeFile, name: str, shared: dict[str, Any], *, candidates: bool) -> FileRead:
    """The units of module `name` (its file path without .md); `candidates`: inbox.md's entries."""
    out = FileRead()
    preamble, sections = tree_file.segments[0], tree_file.segments[1:]
    title_line = next((line for line in preamble.raw.splitlines() if line.startswith("# ")), "")
    title = title_line[2:].strip()
    if not sections:
        body = "\n".join(line for line in preamble.raw.splitlines() if line != title_line).strip()
        if not body:
            out.parts.append({"raw": tree_file.text})
            out.notes.append(f"{tree_file.path} holds no memory (an empty or emptied file): no unit")
            return out
        uid = module_unit_id(name)
        out.units.append(
            {
                "id": uid,
                **shared,
                "title": title or tree_file.path,
                "text": body,
                MC: {
                    "file": tree_file.path,
                    "ref": f"{tree_file.path}#unit-1",
                    "kind": "file",
                    "text": body,
                    "source": tree_file.text,
                },
            }
        )
        out.parts.append({"unit": uid})
        return out
    if preamble.raw:
        out.parts.append({"raw": preamble.raw})
    for ordinal, segment in enumerate(sections, start=1):
        heading_line = segment.raw.splitlines()[0] if segment.raw else ""
        entry = parse_entry(segment.raw, segment.number)
        if entry is None and looks_like_entry(heading_line):
            out.problems.append((segment.number, "an entry heading is `## <ID> — <title>` (with an em dash)"))
            continue
        if entry is None:
            unit = _section_unit(tree_file, name, segment, ordinal, shared)
        else:
            out.problems.extend(entry.problems)
            out.entries.append(entry)
            unit = _entry_unit(tree_file, entry, segment, shared, candidates=candidates, problems=out.problems)
        if unit is None:
            out.parts.append({"raw": segment.raw})
            continue
        out.units.append(unit)
        out.parts.append({"unit": unit["id"]})
    return out


def _section_unit(tree_file: TreeFile, name: str, segment: Segment, ordinal: int, shared) -> dict[str, Any]:
    lines = segment.raw.splitlines()
    body = "\n".join(lines[1:]).strip()
    heading = segment.heading or ""
    return {
        "id": f"{module_unit_id(name)}.unit-{ordinal}",
        **shared,
        "title": heading,
        "text": body or heading,
        MC: {
            "file": tree_file.path,
            "ref": f"{tree_file.path}#unit-{ordinal}",
            "kind": "section",
            "text": body or heading,
            "source": segment.raw,
        },
    }


def _entry_unit(tree_file, entry: Entry, segment: Segment, shared, *, candidates: bool, problems) -> dict | None:
    uid = entry.entry_id.lower()
    if not _IDENT.fullmatch(uid):
        problems.append((entry.line, f"entry id {entry.entry_id} does not map to a unit id ([a-z0-9][a-z0-9_.-]*)"))
        return None
    text = entry.text()
    if not text:
        problems.append((entry.line, f"entry {entry.entry_id} has no body"))
        return None
    status = entry.status
    unit: dict[str, Any] = {"id": uid, **shared, "title": f"{entry.entry_id} — {entry.title}", "text": text}
    subject, facet = entry.fields.get("Subject", "").strip(), entry.fields.get("Facet", "").strip()
    if subject and facet and status != "candidate":
        scope = entry.scope
        unit["subject"] = (f"{scope}/{subject}" if scope else subject).casefold()
        unit["facet"] = facet.casefold()
    mc: dict[str, Any] = {
        "file": tree_file.path,
        "ref": entry.entry_id,
        "id": entry.entry_id,
        "kind": "entry",
        "status": status,
        "text": text,
        "source": segment.raw,
    }
    for key in ("Scope", "Subject", "Facet", "Entry-Type", "Exception-To", "Candidate-Type", "Kind"):
        if entry.fields.get(key):
            mc[key.lower()] = entry.fields[key]
    if entry.evidence:
        mc["evidence"] = list(entry.evidence)
    if entry.fences:
        mc["body_fences"] = list(entry.fences)
    if candidates or status in ("candidate", "promoted"):
        mc["unit_status"] = "candidate"  # never selected (MemoryUnit.status)
    unit[MC] = mc
    return unit
