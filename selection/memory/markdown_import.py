"""Import repo-native markdown memory (the MemoryCustodian layout) as a corpus, and re-import it.

Corpora never change after import (every cache relies on it), so a re-import writes a *new*
corpus, `<name>.v<N>`, of the same lineage, promotes a new frame version of the project when the
manifest's routing changed, and points the project at the new corpus. Old traces keep the corpus
they were made from. The diff against the previous version is returned and audited.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.db import transaction

from authority.audit import audit_record
from authority.selectors import current_frame_version
from authority.services import frame_version_create, promotion_create
from selection.corpus import CorpusData, CorpusError, CorpusIssue, read_corpus
from selection.corpus.memory_markdown import read_memory_directory
from selection.engine.routing.route import structural_conflicts
from selection.engine.routing.types import Conflict
from selection.memory import store
from selection.memory.importing import _embed, _refusals, _write_units, corpus_import
from selection.models import Corpus, Project

# corpus.yaml's top-level "x-memory" (kept in Corpus.extras): {"lineage", "version", "source"}
LINEAGE = "x-memory"


@dataclass(frozen=True)
class MemoryImport:
    corpus: Corpus
    version: int  # 1 for the first import of the lineage
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    frame_changes: tuple[str, ...] = ()  # frame fields whose value changed
    conflicts: tuple[Conflict, ...] = ()
    missing_modules: tuple[str, ...] = ()  # enabled in the manifest, absent on disk


def memory_import(directory: str | Path, *, corpus: str, project: str, actor=None) -> MemoryImport:
    """Import DIR's docs/memory as corpus `corpus` with one project `project` (or a new version).

    Raises CorpusError naming the file and line of anything not understood.
    """
    frame, units = read_memory_directory(directory, project=project)
    missing = tuple(sorted(name for name, ids in frame["modules"].items() if not ids))
    existing = Project.objects.select_related("corpus").filter(slug=project).first()
    version = 1
    if existing is not None:
        lineage = existing.corpus.extras.get(LINEAGE) or {}
        if lineage.get("lineage") != corpus:
            raise CorpusError(
                [
                    CorpusIssue(
                        "corpus.yaml",
                        "",
                        "slug",
                        (
                            f'project "{project}" belongs to corpus "{existing.corpus.name}", not to the memory '
                            f'corpus "{corpus}"; project slugs are unique across an installation'
                        ),
                    )
                ]
            )
        version = int(lineage.get("version", 1)) + 1
    name = corpus if version == 1 else f"{corpus}.v{version}"
    extras = {LINEAGE: {"lineage": corpus, "version": version, "source": str(Path(directory).resolve())}}
    with tempfile.TemporaryDirectory() as tmp:
        _write_interchange(Path(tmp), name=name, project=project, frame=frame, units=units, extras=extras)
        if existing is None:
            imported = corpus_import(tmp, actor=actor)
            return MemoryImport(
                corpus=imported,
                version=1,
                added=tuple(sorted(u["id"] for u in units)),
                conflicts=structural_conflicts(store.corpus_index(imported.pk).units),
                missing_modules=missing,
            )
        data = read_corpus(tmp)
    return _reimport(data, existing, version=version, missing=missing, actor=actor)


def _write_interchange(path: Path, *, name, project, frame, units, extras) -> None:
    doc = {
        "name": name,
        "description": "Repo-native markdown memory.",
        "projects": [{"slug": project, "name": project, "frame": frame}],
    }
    doc.update(extras)
    (path / "corpus.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    (path / "units.jsonl").write_text(
        "".join(json.dumps(u, ensure_ascii=False) + "\n" for u in units), encoding="utf-8"
    )


def _reimport(data: CorpusData, project: Project, *, version: int, missing, actor) -> MemoryImport:
    refusals = [issue for issue in _refusals(data) if issue.field != "slug"]
    if refusals:
        raise CorpusError(refusals)
    before = {u.id: u for u in store.corpus_index(project.corpus_id).units}
    after = {r.unit.id: r.unit for r in data.units}
    changed = tuple(sorted(uid for uid in before.keys() & after.keys() if before[uid] != after[uid]))
    spec = data.projects[0]
    vectors, model_name = _embed([r.unit.text for r in data.units], None)
    with transaction.atomic():
        current = current_frame_version(project=project)
        frame_changes = _frame_changes(current.snapshot if current else {}, spec.frame)
        corpus = Corpus.objects.create(
            name=data.name,
            description=data.description,
            standpoint=data.standpoint,
            embedding_model=model_name,
            extras=dict(data.extras),
        )
        project.corpus = corpus
        project.save(update_fields=["corpus"])
        _write_units(corpus, {project.slug: project}, data.units, vectors, actor=actor)
        if frame_changes:
            frame_version = frame_version_create(
                project=project, snapshot=spec.frame, parent=current, author=actor, origin="import"
            )
            promotion_create(project=project, frame_version=frame_version, promoted_by=actor)
        result = MemoryImport(
            corpus=corpus,
            version=version,
            added=tuple(sorted(after.keys() - before.keys())),
            removed=tuple(sorted(before.keys() - after.keys())),
            changed=changed,
            frame_changes=frame_changes,
            missing_modules=missing,
        )
        audit_record(
            actor=actor,
            project=project,
            action="memory.reimported",
            obj=corpus,
            summary=(
                f"{project.slug}: memory version {version} as corpus {corpus.name} "
                f"(+{len(result.added)} -{len(result.removed)} ~{len(result.changed)} units)"
            ),
            payload={
                "version": version,
                "added": list(result.added),
                "removed": list(result.removed),
                "changed": list(result.changed),
                "frame_changes": list(frame_changes),
            },
        )
    return MemoryImport(**{**result.__dict__, "conflicts": structural_conflicts(store.corpus_index(corpus.pk).units)})


def _frame_changes(before: dict, after: dict) -> tuple[str, ...]:
    """Top-level frame keys whose value differs (routing keys included)."""
    return tuple(sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key)))
