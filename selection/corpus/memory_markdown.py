"""Repo-native markdown memory (the MemoryCustodian layout) read into interchange-format documents.

Pure Python: `read_memory_directory(DIR, project=SLUG)` returns the project's frame mapping and
its units as units.jsonl objects, or raises CorpusError naming the file and line of every part it
does not understand. What is accepted and refused is documented in docs/memory-import.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selection.corpus.issues import CorpusError, CorpusIssue
from selection.corpus.markdown_manifest import MANIFEST, MEMORY_DIR, Issues, Manifest, read_manifest
from selection.engine.routing.custodian import substantial_category

META_KEYS = ("status", "scope", "subject", "facet", "evidence", "supersedes", "superseded-by")
STATUSES = ("active", "superseded")

_ENTRY = re.compile(r"^## +(?P<id>[A-Za-z0-9][A-Za-z0-9_.-]*) +— +(?P<title>\S.*)$")
_META = re.compile(r"^(?:- +)?(?:\*\*)?(?P<key>[A-Za-z][A-Za-z-]*)(?::\*\*|\*\*:|:) *(?P<value>.*)$")


@dataclass
class Entry:
    original_id: str
    title: str
    file: str
    line: int
    meta: dict[str, tuple[str, int]] = field(default_factory=dict)
    body: list[str] = field(default_factory=list)


def read_entries(path: Path, file: str, issues: Issues) -> tuple[str, list[Entry], list[str]]:
    """(title, entries, text of a module without entries)."""
    title = ""
    entries: list[Entry] = []
    loose: list[str] = []
    current: Entry | None = None
    in_meta = False
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.rstrip()
        if line.startswith("# ") and not entries and not title:
            title = line[2:].strip()
            continue
        if line.startswith("## "):
            match = _ENTRY.match(line)
            if match is None:
                issues.add(file, number, "an entry heading is `## <ID> — <title>` (with an em dash)")
                current = None
                continue
            current = Entry(match["id"], match["title"].strip(), file, number)
            entries.append(current)
            in_meta = True
            continue
        if current is None:
            loose.append(line)
            continue
        if in_meta:
            if not line.strip() and not current.meta:
                continue
            meta = _META.match(line)
            if meta is not None and meta["key"].lower() in META_KEYS:
                key = meta["key"].lower()
                if key in current.meta:
                    issues.add(file, number, f'"{meta["key"]}" is given twice for {current.original_id}', key)
                current.meta[key] = (meta["value"].strip(), number)
                continue
            in_meta = False
        current.body.append(line)
    if entries and any(line.strip() for line in loose):
        first = next(i for i, line in enumerate(loose) if line.strip())
        issues.add(file, None, f'text before the first entry is not part of any entry: "{loose[first].strip()[:60]}"')
    return title, entries, loose


def read_memory_directory(directory: str | Path, *, project: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(frame mapping, units.jsonl objects) of the memory directory; CorpusError if not understood."""
    root = Path(directory)
    issues = Issues()
    manifest_path = root / MEMORY_DIR / MANIFEST
    if not manifest_path.is_file():
        raise CorpusError([CorpusIssue(str(MEMORY_DIR / MANIFEST), "", "", f"is missing under {root}")])
    manifest = read_manifest(manifest_path, issues)

    units: list[dict[str, Any]] = []
    module_ids: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    links: list[tuple[str, str, str, int, str]] = []  # (unit id, key, target original id, line, file)
    always = {m.name for m in manifest.always}
    for name, module in sorted(manifest.modules.items()):
        path = root / MEMORY_DIR / module.file
        file = str(MEMORY_DIR / module.file)
        module_ids[name] = []
        if not path.is_file():
            continue  # routed as missing-required / missing-optional
        title, entries, loose = read_entries(path, file, issues)
        kind = module.kind or name.split("/", 1)[0]  # rules/review -> rules -> rule; brief -> brief
        shared = {"project": project, "class": _class_name(kind)}
        if name in always:
            shared["root"] = True
        if module.activation.startswith("path"):
            shared["paths"] = list(module.paths)
        if not entries:
            text = "\n".join(loose).strip()
            if not text:
                issues.add(file, None, "the module holds no entry and no text")
                continue
            uid = name.lower().replace("/", ".")
            units.append({"id": uid, **shared, "title": title or module.file, "text": text})
            module_ids[name].append(uid)
            continue
        for entry in entries:
            uid = entry.original_id.lower()
            if uid in where:
                issues.add(file, entry.line, f"entry id {entry.original_id} is already used at {where[uid]}")
                continue
            where[uid] = f"{file} line {entry.line}"
            unit = _entry_unit(entry, uid, shared, issues)
            if unit is None:
                continue
            for key in ("supersedes", "superseded-by"):
                if key in entry.meta:
                    value, number = entry.meta[key]
                    for target in (v.strip() for v in value.split(",") if v.strip()):
                        links.append((uid, key, target, number, file))
            units.append(unit)
            module_ids[name].append(uid)

    by_id = {u["id"]: u for u in units}
    for uid, key, target, number, file in links:
        other = target.lower()
        if other not in by_id:
            issues.add(file, number, f"{key} names {target}, which no module entry holds", key)
        elif key == "supersedes":
            by_id[uid].setdefault("supersedes", []).append(other)
        else:
            by_id[other].setdefault("supersedes", []).append(uid)
    for unit in units:
        if unit.get("supersedes"):
            unit["supersedes"] = sorted(set(unit["supersedes"]))
    for uid, status_line, file in ((u["id"], u.pop("_status"), u.pop("_file")) for u in units if "_status" in u):
        if (
            status_line is not None
            and not by_id[uid].get("supersedes")
            and not any(uid in (u.get("supersedes") or ()) for u in units)
        ):
            issues.add(file, status_line, f"{uid} is superseded but names no Supersedes or Superseded-By", "status")
    if issues.found:
        raise CorpusError(issues.found)
    return _frame(manifest, module_ids, units, root), units


def _class_name(kind: str) -> str:
    name = re.sub(r"[^a-z0-9_.-]+", "-", kind.lower()).strip("-") or "memory"
    return {
        "rules": "rule",
        "profiles": "profile",
        "areas": "area",
        "decisions": "decision",
        "constraints": "constraint",
    }.get(name, name)


def _entry_unit(entry: Entry, uid: str, shared: dict, issues: Issues) -> dict[str, Any] | None:
    meta = {k: v for k, (v, _) in entry.meta.items()}
    status = meta.get("status", "active").lower()
    if status not in STATUSES:
        issues.add(
            entry.file,
            entry.meta["status"][1],
            f'status "{meta["status"]}" is not one of {", ".join(STATUSES)}',
            "status",
        )
        return None
    text = "\n".join(entry.body).strip()
    if meta.get("evidence"):
        text = f"{text}\nEvidence: {meta['evidence']}".strip()
    if not text:
        issues.add(entry.file, entry.line, f"entry {entry.original_id} has no body")
        return None
    unit: dict[str, Any] = {"id": uid, **shared, "title": f"{entry.original_id} — {entry.title}", "text": text}
    subject, facet = meta.get("subject"), meta.get("facet")
    if bool(subject) != bool(facet):
        issues.add(entry.file, entry.line, f"{entry.original_id}: Subject and Facet come together", "subject")
    elif subject and facet:
        scope = meta.get("scope")
        unit["subject"] = f"{scope}/{subject}" if scope else subject
        unit["facet"] = facet
    unit["_status"] = entry.meta["status"][1] if status == "superseded" else None
    unit["_file"] = entry.file
    return unit


def _frame(manifest: Manifest, module_ids: dict[str, list[str]], units: list[dict], root: Path) -> dict[str, Any]:
    classes = list(dict.fromkeys(u["class"] for u in units))
    categories: dict[str, dict[str, list[str]]] = {}
    always = [m.name for m in manifest.always]
    for name, loads in manifest.load.items():
        spec = categories.setdefault(name, {"load": list(always), "load_if_present": []})
        for module, required in loads:
            spec["load" if required else "load_if_present"].append(module)
    explicit: list[str] = []
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
