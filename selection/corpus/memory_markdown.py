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
from selection.engine.routing.codes import ACTIVATIONS

MEMORY_DIR = Path("docs") / "memory"
MANIFEST = "manifest.md"
OPTIONAL_KINDS = {"enabled rules": "rule", "enabled profiles": "profile", "enabled areas": "area"}
META_KEYS = ("status", "scope", "subject", "facet", "evidence", "supersedes", "superseded-by")
STATUSES = ("active", "superseded")
MODULE_KEYS = ("activation", "tasks", "paths", "description")

_ENTRY = re.compile(r"^## +(?P<id>[A-Za-z0-9][A-Za-z0-9_.-]*) +— +(?P<title>\S.*)$")
_META = re.compile(r"^(?:- +)?(?:\*\*)?(?P<key>[A-Za-z][A-Za-z-]*)(?::\*\*|\*\*:|:) *(?P<value>.*)$")
_BULLET = re.compile(r"^(?P<indent> *)[-*] +(?P<text>.*)$")
_CODE = re.compile(r"`([^`]+)`")
_IDENT = re.compile(r"[a-z0-9][a-z0-9_.-]*")


@dataclass
class Module:
    name: str  # file path under docs/memory without ".md": "areas/storage"
    file: str  # as written in the manifest: "areas/storage.md"
    line: int
    activation: str = "always"  # always | task-list | one of ACTIVATIONS
    kind: str = ""  # rule | profile | area | "" (a base module)
    tasks: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    description: str = ""


@dataclass
class Manifest:
    always: list[Module] = field(default_factory=list)
    load: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)  # category -> (module, required)
    optional: list[Module] = field(default_factory=list)
    modules: dict[str, Module] = field(default_factory=dict)  # every module the manifest names


@dataclass
class Entry:
    original_id: str
    title: str
    file: str
    line: int
    meta: dict[str, tuple[str, int]] = field(default_factory=dict)
    body: list[str] = field(default_factory=list)


class _Issues:
    def __init__(self) -> None:
        self.found: list[CorpusIssue] = []

    def add(self, file: str, line: int | None, message: str, field_name: str = "") -> None:
        self.found.append(CorpusIssue(file, f"line {line}" if line else "", field_name, message))


def _skip(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("<!--") or stripped.startswith(">")


def _module_ref(text: str) -> str:
    spans = _CODE.findall(text)
    return (spans[0] if spans else text).strip()


def _module(ref: str, file: str, line: int, issues: _Issues) -> Module | None:
    ref = ref.replace("\\", "/")
    if not ref.endswith(".md") or ref.startswith("/") or ".." in ref.split("/"):
        issues.add(file, line, f'"{ref}" is not a module file (a relative path ending in .md)')
        return None
    return Module(name=ref[:-3], file=ref, line=line)


def _category_names(heading: str, file: str, line: int, issues: _Issues) -> list[str]:
    names = []
    for part in heading.split(" / "):
        name = re.sub(r"\s+", "-", part.strip().lower())
        if not _IDENT.fullmatch(name):
            issues.add(file, line, f'task category "{part.strip()}" is not a name ([a-z0-9][a-z0-9_.-]*)')
        else:
            names.append(name)
    return names


def _module_list(value: str) -> list[str]:
    return [_module_ref(v) for v in value.split(",") if v.strip()]


def read_manifest(path: Path, issues: _Issues) -> Manifest:
    file = str(MEMORY_DIR / MANIFEST)
    manifest = Manifest()
    section = None  # always | task | optional
    categories: list[str] = []
    pending: str | None = None  # "load" / "load if present" awaiting bullets
    kind = ""
    current: Module | None = None

    def remember(module: Module) -> Module:
        known = manifest.modules.get(module.name)
        if known is None:
            manifest.modules[module.name] = module
            return module
        return known

    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.rstrip()
        if _skip(line):
            continue
        if line.startswith("# "):
            if section is not None:
                issues.add(file, number, "a second top-level heading; the manifest has one title")
            continue
        if line.startswith("## "):
            title = line[3:].strip().lower()
            pending, current, categories = None, None, []
            if title == "always load":
                section = "always"
            elif title == "load by task":
                section = "task"
            elif "optional" in title:
                section = "optional"
            else:
                issues.add(
                    file,
                    number,
                    f'unknown manifest section "{line[3:].strip()}" '
                    "(known: Always load, Load by task, an optional-module index)",
                )
                section = "unknown"
            continue
        if section is None:
            issues.add(file, number, "text before the first section is not understood")
            continue
        if section == "unknown":
            continue
        if line.startswith("### "):
            heading = line[4:].strip()
            pending, current = None, None
            if section == "task":
                categories = _category_names(heading, file, number, issues)
                for name in categories:
                    manifest.load.setdefault(name, [])
            elif section == "optional":
                kind = OPTIONAL_KINDS.get(heading.lower(), "")
                if not kind:
                    issues.add(
                        file,
                        number,
                        f'unknown optional-module heading "{heading}" '
                        f"(known: {', '.join(k.title() for k in OPTIONAL_KINDS)})",
                    )
            else:
                issues.add(file, number, "a ### heading belongs under Load by task or the optional-module index")
            continue
        bullet = _BULLET.match(line)
        if section == "always":
            if bullet is None or bullet["indent"]:
                issues.add(file, number, "under Always load, each line is a bullet naming a module file")
                continue
            module = _module(_module_ref(bullet["text"]), file, number, issues)
            if module is not None:
                manifest.always.append(remember(module))
            continue
        if section == "task":
            if bullet is None and line.lower().startswith(("load:", "load if present:")):
                key, _, value = line.partition(":")
                pending = key.strip().lower()
                if not categories:
                    issues.add(file, number, f'"{key}:" needs a ### task category heading above it')
                    continue
                for ref in _module_list(value):
                    _load(manifest, categories, ref, pending == "load", file, number, issues, remember)
                continue
            if bullet is not None and pending is not None and categories:
                _load(
                    manifest, categories, _module_ref(bullet["text"]), pending == "load", file, number, issues, remember
                )
                continue
            issues.add(file, number, "under Load by task, expected Load: or Load if present: (or their bullets)")
            continue
        # the optional-module index
        if bullet is None or not kind:
            issues.add(file, number, "expected a module bullet under Enabled rules / profiles / areas")
            continue
        if not bullet["indent"]:
            module = _module(_module_ref(bullet["text"]), file, number, issues)
            current = None
            if module is not None:
                module.kind = kind
                module.activation = ""
                current = module
                manifest.optional.append(module)
                if module.name in manifest.modules and manifest.modules[module.name] is not module:
                    issues.add(
                        file,
                        number,
                        f'module "{module.file}" is already named at line '
                        f"{manifest.modules[module.name].line}; a module has one activation",
                    )
                manifest.modules[module.name] = module
            continue
        if current is None:
            issues.add(file, number, "a nested bullet needs a module bullet above it")
            continue
        key, sep, value = bullet["text"].partition(":")
        key = key.strip().strip("*").lower()
        if not sep or key not in MODULE_KEYS:
            issues.add(file, number, f'unknown module setting "{bullet["text"]}" (known: {", ".join(MODULE_KEYS)})')
            continue
        value = value.strip()
        if key == "activation":
            if value not in ACTIVATIONS:
                issues.add(file, number, f'activation "{value}" is not one of {", ".join(ACTIVATIONS)}', "activation")
            current.activation = value
        elif key == "tasks":
            current.tasks = [n for part in value.split(",") for n in _category_names(part, file, number, issues)]
        elif key == "paths":
            current.paths = _CODE.findall(value)
            if not current.paths:
                issues.add(file, number, "paths are code spans: `cli/**/*.py`", "paths")
        else:
            current.description = value
    for module in manifest.optional:
        if not module.activation:
            issues.add(file, module.line, f'module "{module.file}" has no activation', "activation")
        elif module.activation.startswith("task") and not module.tasks:
            issues.add(file, module.line, f'module "{module.file}" is activated by task but lists no tasks', "tasks")
        elif module.activation.startswith("path") and not module.paths:
            issues.add(file, module.line, f'module "{module.file}" is activated by path but lists no paths', "paths")
        elif module.tasks and not module.activation.startswith("task"):
            why = f'module "{module.file}" lists tasks, but its activation is "{module.activation}"'
            issues.add(file, module.line, why, "tasks")
        elif module.paths and not module.activation.startswith("path"):
            why = f'module "{module.file}" lists paths, but its activation is "{module.activation}"'
            issues.add(file, module.line, why, "paths")
        elif not module.activation.startswith("task") and (
            loader := next((c for c, loads in manifest.load.items() if any(n == module.name for n, _ in loads)), None)
        ):
            issues.add(
                file,
                module.line,
                f'Load by task "{loader}" names "{module.file}", whose activation "{module.activation}" '
                "admits no task trigger",
                "activation",
            )
    return manifest


def _load(manifest, categories, ref, required, file, number, issues, remember) -> None:
    module = _module(ref, file, number, issues)
    if module is None:
        return
    module = remember(module)
    for name in categories:
        manifest.load[name].append((module.name, required))


def read_entries(path: Path, file: str, issues: _Issues) -> tuple[str, list[Entry], list[str]]:
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
    issues = _Issues()
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


def _entry_unit(entry: Entry, uid: str, shared: dict, issues: _Issues) -> dict[str, Any] | None:
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
            }
            for name, spec in sorted(categories.items())
        },
        "modules": {name: ids for name, ids in sorted(module_ids.items())},
        "explicit_only": sorted(set(explicit)),
        # every indexed module keeps its kind: a trigger it does not name is refused, not obeyed
        "activation": {m.name: m.activation for m in sorted(manifest.optional, key=lambda m: m.name)},
    }
