"""`select --format mc-json|mc-text`: a selection rendered as MemoryCustodian's `read` prints it,
so a script written for the peer runs against the product unchanged (docs/routing.md).

The engine decides (selection.engine.routing.custodian_output); this module only fetches what the
rendering reads: the project's promoted routing policy and the units of its modules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from selection.engine.routing.custodian import EXPLICIT_KINDS
from selection.engine.routing.custodian_output import custodian_read, explicit_overlays
from selection.engine.routing.custodian_render import render_json, render_text
from selection.memory import store
from selection.models import Project
from selection.serving.selections import Selection, frame_for

FORMATS = ("text", "json", "mc-json", "mc-text")
__all__ = ["EXPLICIT_KINDS", "FORMATS", "custodian_output", "custodian_overlays"]


def memory_texts(project_root: Path) -> dict[str, str]:
    """Every module file under ROOT/docs/memory, by its path there ("areas/backend.md")."""
    memory = project_root / "docs" / "memory"
    return {p.relative_to(memory).as_posix(): p.read_text(encoding="utf-8") for p in sorted(memory.rglob("*.md"))}


def custodian_overlays(
    project: Project, requested: Mapping[str, Sequence[str]]
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """--rule/--profile/--area slugs -> (overlays for routing, the slugs the manifest lacks)."""
    _, frame = frame_for(project)
    return explicit_overlays(frame.routing, requested)


def custodian_output(
    selection: Selection,
    project: Project,
    *,
    fmt: str,
    requested: Mapping[str, Sequence[str]],
    missing: Sequence[tuple[str, str]],
    explain: bool = False,
    project_root: Path | None = None,
) -> tuple[str, int]:
    """(what the command prints, the peer's exit status) for one stored selection.

    `project_root`: the repository the memory was imported from (the peer's --project-root): its
    docs/memory files give the modules' own text, so the context is the peer's byte for byte, and
    a path of the scope that does not exist there is marked missing-on-disk."""
    report = selection.result.trace.routing
    policy = selection.project_frame.routing
    uids = [uid for _, ids in policy.modules for uid in ids]
    units = store.units_by_uid(corpus_id=project.corpus_id, uids=uids)
    read = custodian_read(
        report,
        policy,
        units,
        supplied_task=report.inputs.task_category or "general",
        explicit=requested,
        missing_explicit=missing,
        module_texts=memory_texts(project_root) if project_root is not None else None,
        project_root=project_root,
    )
    text = render_text(read, explain=explain)
    if fmt == "mc-text":
        return text, read.exit_code
    payload = render_json(read, text=text)
    return json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":")), read.exit_code
