"""The memory manifest (docs/memory/manifest.md) read: its modules, their categories and activations.

Also the sections that route nothing but are kept: the Protocol section (checked by
custodian/protocol.py), Trust boundary, the optional-rule/profile/area prose, Explicit only and
Context budget. Lines inside a code fence or an HTML comment are text, never structure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from selection.corpus.custodian.manifest_parts import (
    CANONICAL_HEADINGS,
    PROSE_SECTIONS,
    Budget,
    budget_of,
    unsafe_path,
)
from selection.corpus.custodian.markdown import scan
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
    # kept, routing nothing: prose by section title, Explicit only paths, Context budget lines
    prose: dict[str, str] = field(default_factory=dict)
    explicit_paths: list[str] = field(default_factory=list)
    budgets: list[Budget] = field(default_factory=list)
    governed: bool = False  # a Protocol 0.6+ manifest: canonical task headings only
    # each Load by task heading as written, with the category names it declares (h3 headings the
    # peer maps to one canonical task: "Planning / architecture / ..." -> planning, architecture, ...)
    route_headings: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)


class Issues:
    def __init__(self) -> None:
        self.found: list[CorpusIssue] = []

    def add(self, file: str, line: int | None, message: str, field_name: str = "") -> None:
        self.found.append(CorpusIssue(file, f"line {line}" if line else "", field_name, message))


def _skip(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith(">")


def _module_ref(text: str) -> str:
    spans = _CODE.findall(text)
    return (spans[0] if spans else text).strip()


def _module(ref: str, file: str, line: int, issues: Issues) -> Module | None:
    ref = ref.replace("\\", "/")
    if unsafe_path(ref):
        issues.add(file, line, f'unsafe or malformed memory path "{ref}" (a relative path under docs/memory)')
        return None
    if not ref.endswith(".md"):
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


def read_manifest(path: Path, issues: Issues, *, governed: bool = False) -> Manifest:
    file = str(MEMORY_DIR / MANIFEST)
    manifest = Manifest(governed=governed)
    section = None  # always | task | optional | protocol | prose | explicit | budget
    categories: list[str] = []
    pending: str | None = None  # "load" / "load if present" awaiting bullets
    kind = ""
    current: Module | None = None
    seen: dict[str, int] = {}  # section -> count
    subsections: dict[str, int] = {}  # Enabled ... heading -> line
    sentinel: dict[str, int] = {}  # Enabled ... heading -> line of "None enabled."
    keys_seen: set[str] = set()
    prose_title = ""
    preamble: list[str] = []
    text = path.read_text(encoding="utf-8")
    code_lines = {line.number for line in scan(text) if line.code}
    for line in scan(text):
        opening = line.text.lstrip()
        if not line.code and opening.startswith("```") and "`" in opening.lstrip("`"):
            issues.add(file, line.number, "a code fence's info string must not contain backticks")

    def remember(module: Module) -> Module:
        known = manifest.modules.get(module.name)
        if known is None:
            manifest.modules[module.name] = module
            return module
        return known

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if number in code_lines or (section in ("protocol", "prose") and not line.startswith("## ")):
            if section == "prose" and number not in code_lines:
                manifest.prose[prose_title] = (manifest.prose.get(prose_title, "") + "\n" + raw).strip("\n")
            continue
        if _skip(line):
            continue
        if line.startswith("# "):
            if section is not None:
                issues.add(file, number, "a second top-level heading; the manifest has one title")
            continue
        if line.startswith("## "):
            title = re.sub(r"[ \t]+#+[ \t]*$", "", line[3:]).strip().lower()
            pending, current, categories = None, None, []
            section = _section_of(title)
            seen[section] = seen.get(section, 0) + 1
            if section == "optional" and seen[section] > 1:
                issues.add(file, number, "a manifest has at most one Optional module index")
            elif section == "task" and seen[section] > 1:
                issues.add(file, number, f"expected exactly one 'Load by task' section, found {seen[section]}")
            elif section == "prose":
                prose_title = line[3:].strip()
            elif section == "unknown":
                issues.add(
                    file,
                    number,
                    f'unknown manifest section "{line[3:].strip()}" '
                    "(known: MemoryCustodian Protocol, Trust boundary, Always load, Load by task, Optional "
                    "module index, Optional rules, Optional profiles, Area-specific memory, Explicit only, "
                    "Context budget)",
                )
            continue
        if section is None:
            preamble.append(raw)
            continue
        if section == "unknown":
            if line.startswith("### ") and line[4:].strip().casefold() in CANONICAL_HEADINGS:
                issues.add(file, number, f'canonical heading appears outside Load by task: "{line[4:].strip()}"')
            continue
        if line.startswith("### "):
            heading = line[4:].strip()
            pending, current = None, None
            if section == "task":
                if governed and heading.casefold() not in CANONICAL_HEADINGS:
                    issues.add(file, number, f'unknown H3 route heading "{heading}" under Load by task')
                categories = _category_names(heading, file, number, issues)
                manifest.route_headings.append((heading, tuple(categories)))
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
                elif heading.lower() in subsections:
                    issues.add(file, number, f'duplicate optional module subsection "{heading}"')
                subsections.setdefault(heading.lower(), number)
            else:
                if heading.casefold() in CANONICAL_HEADINGS:
                    issues.add(file, number, f'canonical heading appears outside Load by task: "{heading}"')
                else:
                    issues.add(file, number, "a ### heading belongs under Load by task or the optional-module index")
            continue
        bullet = _BULLET.match(line)
        if section in ("explicit", "budget"):
            if bullet is None or bullet["indent"]:
                issues.add(
                    file,
                    number,
                    f"under {'Explicit only' if section == 'explicit' else 'Context budget'}, each line is a bullet",
                )
            elif section == "explicit":
                manifest.explicit_paths.append(_module_ref(bullet["text"]))
            else:
                budget = budget_of(bullet["text"], number)
                if budget is None:
                    issues.add(
                        file,
                        number,
                        f'a Context budget line is "<file>: <N> tokens max" or a note, not "{bullet["text"]}"',
                    )
                else:
                    manifest.budgets.append(budget)
            continue
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
        if bullet is not None and not subsections and not bullet["indent"]:
            issues.add(file, number, "an optional module bullet outside a canonical subsection (### Enabled ...)")
            continue
        if bullet is None and not kind:
            continue  # the index's own prose ("Discover optional memory without loading it.")
        if bullet is None or not kind:
            issues.add(file, number, "expected a module bullet under Enabled rules / profiles / areas")
            continue
        subsection = next((h for h, n in sorted(subsections.items(), key=lambda i: -i[1]) if n < number), "")
        if not bullet["indent"] and bullet["text"].strip() == "None enabled.":
            if any(m.kind == kind for m in manifest.optional):
                issues.add(file, number, "contradictory optional module sentinel: None enabled. beside a module")
            sentinel[subsection] = number
            current = None
            continue
        if not bullet["indent"]:
            if subsection in sentinel:
                issues.add(file, number, "contradictory optional module sentinel: a module beside None enabled.")
            keys_seen = set()
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
                        f'duplicate optional module declaration: "{module.file}" is already named at line '
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
        if key in keys_seen:
            issues.add(file, number, f'duplicate optional module key "{key}" for "{current.file}"', key)
            continue
        keys_seen.add(key)
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
    if governed and not seen.get("task"):
        issues.add(file, None, "expected exactly one 'Load by task' section, found 0")
    if any(line.strip() for line in preamble):
        manifest.prose[""] = "\n".join(preamble).strip("\n")
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


def _section_of(title: str) -> str:
    if title == "always load":
        return "always"
    if title == "load by task":
        return "task"
    if title == "optional module index" or ("optional" in title and "index" in title):
        return "optional"
    if title == "memorycustodian protocol":
        return "protocol"
    if title == "explicit only":
        return "explicit"
    if title == "context budget":
        return "budget"
    if title in PROSE_SECTIONS:
        return "prose"
    return "unknown"


def _load(manifest, categories, ref, required, file, number, issues, remember) -> None:
    module = _module(ref, file, number, issues)
    if module is None:
        return
    module = remember(module)
    for name in categories:
        manifest.load[name].append((module.name, required))
