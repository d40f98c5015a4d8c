"""The memory manifest (docs/memory/manifest.md) read: its modules, their categories and activations."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from selection.corpus.issues import CorpusIssue
from selection.corpus.places import NAME_RULE
from selection.engine.routing.codes import ACTIVATIONS

MEMORY_DIR = Path("docs") / "memory"
MANIFEST = "manifest.md"
OPTIONAL_KINDS = {"enabled rules": "rule", "enabled profiles": "profile", "enabled areas": "area"}
MODULE_KEYS = ("activation", "tasks", "paths", "description")

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


class Issues:
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


def _module(ref: str, file: str, line: int, issues: Issues) -> Module | None:
    ref = ref.replace("\\", "/")
    if not ref.endswith(".md") or ref.startswith("/") or ".." in ref.split("/"):
        issues.add(file, line, f'"{ref}" is not a module file (a relative path ending in .md)')
        return None
    return Module(name=ref[:-3], file=ref, line=line)


def _category_names(heading: str, file: str, line: int, issues: Issues) -> list[str]:
    names = []
    for part in heading.split(" / "):
        name = re.sub(r"\s+", "-", part.strip().lower())
        if not _IDENT.fullmatch(name):
            issues.add(file, line, f'task category "{part.strip()}" {NAME_RULE}')
        else:
            names.append(name)
    return names


def _module_list(value: str) -> list[str]:
    return [_module_ref(v) for v in value.split(",") if v.strip()]


def read_manifest(path: Path, issues: Issues) -> Manifest:
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
