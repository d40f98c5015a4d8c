"""Repo-native markdown memory (the MemoryCustodian layout) read into interchange-format documents.

Pure Python: `read_memory(DIR, project=SLUG)` returns a MemoryRead (the project's frame mapping,
its units as units.jsonl objects, the layout kept for export, the Subject registry and the notes
on what is kept but not selected), or raises CorpusError naming the file and line of every part
it does not understand. `read_memory_directory` is its (frame, units) pair. What is accepted,
mapped and refused is documented in docs/memory-import.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selection.corpus.custodian.entries import Entry, parse_entry, scope_problem
from selection.corpus.custodian.layout import LAYOUT, MC, file_units, read_tree
from selection.corpus.custodian.protocol import ProtocolInvalid, check_protocol, governed
from selection.corpus.custodian.subjects import Subject, read_subjects
from selection.corpus.issues import CorpusError, CorpusIssue
from selection.corpus.markdown_manifest import MANIFEST, MEMORY_DIR, Issues, Manifest, read_manifest
from selection.engine.routing.custodian import substantial_category

REGISTRY = "subjects.md"
RECONCILIATIONS = "reconciliations.md"
INBOX = "inbox.md"


@dataclass
class LocatedEntry:
    file: str  # relative to docs/memory
    entry: Entry


@dataclass
class MemoryRead:
    frame: dict[str, Any]
    units: list[dict[str, Any]]
    layout: dict[str, Any]  # corpus extras LAYOUT: {"files": {path: [parts]}}
    manifest: Manifest
    protocol: dict[str, str] = field(default_factory=dict)
    entries: list[LocatedEntry] = field(default_factory=list)  # every entry, archive included
    subjects: list[Subject] = field(default_factory=list)
    subject_problems: list[tuple[int | None, str]] = field(default_factory=list)
    reconciliations: str = ""
    notes: list[str] = field(default_factory=list)  # kept for export, not selected
    canonical: set[str] = field(default_factory=set)  # files the manifest authorizes (plus the core)

    @property
    def governed(self) -> bool:
        return governed(self.protocol)


def read_memory_directory(directory: str | Path, *, project: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(frame mapping, units.jsonl objects) of the memory directory; CorpusError if not understood."""
    read = read_memory(directory, project=project)
    return read.frame, read.units


def read_memory(directory: str | Path, *, project: str, strict: bool = True) -> MemoryRead:
    """The memory directory read; `strict=False` returns what it could read with the issues in
    `notes` instead of raising (the conflict audit reads a tree the importer would refuse)."""
    root = Path(directory)
    memory = root / MEMORY_DIR
    manifest_path = memory / MANIFEST
    if not manifest_path.is_file():
        raise CorpusError([CorpusIssue(str(MEMORY_DIR / MANIFEST), "", "", f"is missing under {root}")])
    issues = Issues()
    manifest_file = str(MEMORY_DIR / MANIFEST)
    try:
        text = manifest_path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorpusError([CorpusIssue(manifest_file, "", "", f"is not UTF-8 text (byte {error.start})")]) from None
    try:
        protocol, _line = check_protocol(text)
    except ProtocolInvalid as error:
        location = f"line {error.line}" if error.line else ""
        raise CorpusError([CorpusIssue(manifest_file, location, "", str(error))]) from None
    manifest = read_manifest(manifest_path, issues, governed=governed(protocol))
    files, unreadable = read_tree(memory)
    tree = {f.path: f for f in files}
    for path, problem in unreadable:
        issues.add(str(MEMORY_DIR / path), None, problem)
    read = MemoryRead(frame={}, units=[], layout={"files": {}}, manifest=manifest, protocol=protocol)
    if REGISTRY in tree:
        read.subjects, read.subject_problems = read_subjects(tree[REGISTRY].text)
    if RECONCILIATIONS in tree:
        read.reconciliations = tree[RECONCILIATIONS].text
    module_ids: dict[str, list[str]] = {name: [] for name in manifest.modules}
    always = {m.name for m in manifest.always}
    archive = sorted(p for p in tree if p.startswith("archive/") and not _readme(p))
    names = {module.file: name for name, module in manifest.modules.items()}
    names.update({path: path[:-3] for path in archive})
    read.canonical = set(names) | {"brief.md", "decisions.md", "constraints.md", "do-not-use.md", INBOX}
    where: dict[str, str] = {}
    for path, tree_file in tree.items():
        file = str(MEMORY_DIR / path)
        name = names.get(path)
        if name is None:
            read.layout["files"][path] = [{"raw": tree_file.text}]
            if path not in (MANIFEST, REGISTRY, RECONCILIATIONS) and not _readme(path):
                read.notes.append(f"{file} is not named by the manifest: kept for export, not imported")
                for segment in tree_file.segments[1:]:
                    if (entry := parse_entry(segment.raw, segment.number)) is not None:
                        read.entries.append(LocatedEntry(path, entry))  # audited, never a unit
            continue
        module = manifest.modules.get(name)
        shared = _shared(project, name, module, always)
        found = file_units(tree_file, name, shared, candidates=path == INBOX)
        for number, message in found.problems:
            issues.add(file, number, message)
        for entry in found.entries if read.governed else ():
            if (problem := scope_problem(entry)) is not None:
                issues.add(file, *problem, "scope")
        read.notes.extend(f"{MEMORY_DIR.as_posix()}/{note}" for note in found.notes)
        read.entries.extend(LocatedEntry(path, entry) for entry in found.entries)
        read.layout["files"][path] = found.parts
        module_ids.setdefault(name, [])
        for unit in found.units:
            if unit["id"] in where:
                issues.add(
                    file, None, f"entry id {unit[MC].get('id', unit['id'])} is already used at {where[unit['id']]}"
                )
                continue
            where[unit["id"]] = f"{file}"
            read.units.append(unit)
            if not unit[MC].get("unit_status"):  # a candidate is stored, never routed or selected
                module_ids[name].append(unit["id"])
    _link(read, issues)
    if issues.found and strict:
        raise CorpusError(issues.found)
    read.notes.extend(str(issue) for issue in issues.found)
    read.frame = _frame(manifest, module_ids, read.units, root, archive)
    return read


def _readme(path: str) -> bool:
    return path.rsplit("/", 1)[-1].casefold() == "readme.md"


def _shared(project: str, name: str, module, always: set[str]) -> dict[str, Any]:
    kind = (module.kind if module else "") or name.split("/", 1)[0]
    shared: dict[str, Any] = {"project": project, "class": _class_name(kind)}
    if name in always:
        shared["root"] = True
    if module is not None and module.activation.startswith("path"):
        shared["paths"] = list(module.paths)
    return shared


def _link(read: MemoryRead, issues: Issues) -> None:
    """Supersedes / Superseded-By become `supersedes` links (archive entries included)."""
    by_id = {u["id"]: u for u in read.units}
    for located in read.entries:
        entry, file = located.entry, str(MEMORY_DIR / located.file)
        uid = entry.entry_id.lower()
        if uid not in by_id:
            continue
        for key in ("Supersedes", "Superseded-By"):
            values = entry.lists.get(key) or [v for v in entry.fields.get(key, "").split(",")]
            for target in (v.strip() for v in values if v.strip()):
                other = target.lower()
                if other not in by_id:
                    issues.add(
                        file,
                        entry.field_lines.get(key),
                        f"{key} names {target}, which no module entry holds",
                        key.lower(),
                    )
                elif key == "Supersedes":
                    by_id[uid].setdefault("supersedes", []).append(other)
                else:
                    by_id[other].setdefault("supersedes", []).append(uid)
    for unit in read.units:
        if unit.get("supersedes"):
            unit["supersedes"] = sorted(set(unit["supersedes"]))
    linked = {t for u in read.units for t in u.get("supersedes", ())}
    for located in read.entries:
        entry = located.entry
        uid = entry.entry_id.lower()
        if entry.status == "superseded" and uid in by_id and not by_id[uid].get("supersedes") and uid not in linked:
            issues.add(
                str(MEMORY_DIR / located.file),
                entry.field_lines.get("Status"),
                f"{uid} is superseded but names no Supersedes or Superseded-By",
                "status",
            )


def _class_name(kind: str) -> str:
    name = re.sub(r"[^a-z0-9_.-]+", "-", kind.lower()).strip("-") or "memory"
    return {
        "rules": "rule",
        "profiles": "profile",
        "areas": "area",
        "decisions": "decision",
        "constraints": "constraint",
    }.get(name, name)


def _frame(manifest: Manifest, module_ids, units: list[dict], root: Path, archive: list[str]) -> dict[str, Any]:
    classes = list(dict.fromkeys(u["class"] for u in units))
    categories: dict[str, dict[str, list[str]]] = {}
    always = [m.name for m in manifest.always]
    for name, loads in manifest.load.items():
        spec = categories.setdefault(name, {"load": list(always), "load_if_present": []})
        for module, required in loads:
            spec["load" if required else "load_if_present"].append(module)
    explicit: list[str] = [path[:-3] for path in archive]
    for module in manifest.optional:
        if module.activation.startswith("task"):
            for name in module.tasks:
                spec = categories.setdefault(name, {"load": list(always), "load_if_present": []})
                spec["load_if_present"].append(module.name)
        elif module.activation == "explicit-only":
            explicit.append(module.name)
    return {
        "purpose": f"Repo-native memory imported from {root.name}/{MEMORY_DIR.as_posix()}.",
        "default_classes": classes,
        "work_types": {name: classes for name in sorted(categories)},
        "task_categories": {
            name: {
                "work_types": [name],
                "load": list(dict.fromkeys(spec["load"])),
                "load_if_present": list(dict.fromkeys(spec["load_if_present"])),
                # the peer's rule: only substantial work needs a path scope for its areas
                "needs_scope": substantial_category(name),
            }
            for name, spec in sorted(categories.items())
        },
        "modules": {name: ids for name, ids in sorted(module_ids.items())},
        "explicit_only": sorted(set(explicit)),
        # every indexed module keeps its kind: a trigger it does not name is refused, not obeyed
        "activation": {m.name: m.activation for m in sorted(manifest.optional, key=lambda m: m.name)},
        # the peer's boundary: a module routing does not load never reaches the bundle by ranking
        "routing": "bounded",
    }


def layout_extras(read: MemoryRead) -> dict[str, Any]:
    """What the corpus keeps of the layout (corpus extras LAYOUT), for the export."""
    return {LAYOUT: read.layout}
