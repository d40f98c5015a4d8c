"""Trees in MemoryCustodian's layout, built by the tests, read and routed with no database: the
reader, the engine's select and the peer's read output, as `select --format mc-*` runs them."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from selection.corpus import read_corpus
from selection.corpus.memory_markdown import read_memory_directory
from selection.engine.index import CorpusIndex
from selection.engine.pipeline import select
from selection.engine.routing.custodian import RESTRUCTURING
from selection.engine.routing.custodian_output import CustodianRead, custodian_read, explicit_overlays
from selection.engine.routing.custodian_render import render_json, render_text
from selection.engine.routing.types import RoutingInputs
from selection.engine.types import SelectionRequest, Unit, WorkFrame

PROJECT = "mc"
SUBJECT = "MC-SUBJ-20260801-a1b2c3d4"

BASE_ROUTES = f"""\
## Load by task

### Planning / architecture / {RESTRUCTURING}
Load:
- decisions.md
- constraints.md
- do-not-use.md

### Implementation / execution / debugging
Load:
- decisions.md
- constraints.md
- do-not-use.md
Load if present:
- preferences.md

### User-facing artifact / output
Load:
- do-not-use.md
Load if present:
- preferences.md

### Preferences
Load if present:
- preferences.md

### Change history / recap
Load:
- decisions.md
Load if present:
- changelog.md
"""

SEED = {
    "brief.md": "# Project Brief\n\nPurpose:\nProtocol 0.7 release tests.\n",
    "constraints.md": (
        "# Constraints\n\n## MC-CON-20260801-11111111 — Dependency-free CLI\n\n"
        "Constraint:\nThe CLI uses the standard library only.\n"
    ),
    "decisions.md": (
        "# Decisions\n\n## MC-DEC-20260801-11111111 — Notes as JSON\n\n"
        "Decision:\nNotes persist as human-readable local JSON files.\n"
    ),
    "do-not-use.md": "# Do Not Use\n\n## MC-DNU-20260801-11111111 — No pickle\n\nDo not store notes with pickle.\n",
}


def manifest(optional: str = "") -> str:
    text = "# Memory Manifest\n\n## Always load\n- brief.md\n\n" + BASE_ROUTES
    if optional:
        text += "\n## Optional module index\n\n" + optional
    return text


AREA_BACKEND = "### Enabled areas\n- `areas/backend.md`\n  - activation: path\n  - paths: `cli/**`\n"
BACKEND = "# Backend\n\n## MC-AREA-20260801-11111111 — Storage layer\n\nThe store writes through one module.\n"


def tree(root: Path, files: dict[str, str | None], *, optional: str = "") -> Path:
    """docs/memory under `root`: the seed, then `files` (None deletes one), and the manifest."""
    memory = root / "docs" / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    for name, text in {**SEED, "manifest.md": manifest(optional), **files}.items():
        path = memory / name
        if text is None:
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@dataclass
class Read:
    code: int
    text: str
    doc: dict
    read: CustodianRead
    bundle_units: frozenset[str]
    trace: object


def _corpus(root: Path, tmp: Path):
    frame, units = read_memory_directory(root, project=PROJECT)
    target = tmp / "corpus"
    target.mkdir(parents=True, exist_ok=True)
    doc = {"name": PROJECT, "projects": [{"slug": PROJECT, "name": PROJECT, "frame": frame}]}
    (target / "corpus.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    (target / "units.jsonl").write_text("".join(json.dumps(u) + "\n" for u in units), encoding="utf-8")
    data = read_corpus(target)
    return data.projects[0].project_frame, [r.unit for r in data.units]


def module_texts(root: Path) -> dict[str, str]:
    memory = root / "docs" / "memory"
    return {p.relative_to(memory).as_posix(): p.read_text(encoding="utf-8") for p in sorted(memory.rglob("*.md"))}


def read(
    root: Path,
    task: str,
    *,
    paths=(),
    rules=(),
    profiles=(),
    areas=(),
    strict=False,
    no_local=False,
    local_units: tuple[Unit, ...] = (),
    explain=True,
    names_only=True,
    policy: str | None = None,
    query="How are notes stored?",
    budget=4000,
) -> Read:
    """The peer's `read --task TASK [--path ...] [--strict-routing] --explain --names-only` over the
    tree, as the product runs it."""
    frame, units = _corpus(root, root.parent / f"corpus-{root.name}")
    if policy is not None:
        frame = replace(frame, routing=replace(frame.routing, mode=policy))
    explicit = {"rule": list(rules), "profile": list(profiles), "area": list(areas)}
    overlays, missing = explicit_overlays(frame.routing, explicit)
    inputs = RoutingInputs(task_category=task, paths=tuple(paths), overlays=overlays, strict=strict, no_local=no_local)
    request = SelectionRequest(
        project_frame=frame,
        work_frame=WorkFrame(objective="Change how notes are stored."),
        query=query,
        budget_tokens=budget,
        condition="C6",
        routing=inputs,
        local_units=() if no_local else local_units,
    )
    result = select(request, CorpusIndex.build(units))
    got = custodian_read(
        result.trace.routing,
        frame.routing,
        {u.id: u for u in units},
        supplied_task=task,
        explicit=explicit,
        missing_explicit=missing,
        module_texts=module_texts(root),
        project_root=root,
        local_units=request.local_units,
    )
    text = render_text(got, explain=explain, names_only=names_only)
    doc = render_json(got, text=text)
    return Read(got.exit_code, text, doc, got, frozenset(result.bundle.unit_ids()), result.trace)
