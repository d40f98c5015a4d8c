"""Import repo-native markdown memory (the MemoryCustodian layout) as a corpus, keep it in step
with the repository, check a tree without writing, and write the layout back.

The first import of a lineage is a corpus import (one `created` MemoryChange per unit; inbox
candidates stored with status `candidate`, never selected). Importing the same directory again
applies only the differences to the same corpus (selection/memory/markdown_reimport.py): units
added, changed, removed (their validity closed) and superseded, each a MemoryChange with the
import as its batch, so the repository stays the source of truth and every change keeps its
lineage.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from django.db import transaction

from selection.corpus import CorpusError, CorpusIssue, read_corpus
from selection.corpus.custodian.conflicts import ConflictResult, analyze_conflicts
from selection.corpus.custodian.export import layout_files, write_layout
from selection.corpus.custodian.layout import LAYOUT, MC
from selection.corpus.memory_markdown import MemoryRead, read_memory
from selection.engine.routing.route import structural_conflicts
from selection.engine.routing.types import Conflict
from selection.memory import store
from selection.memory.importing import corpus_import
from selection.memory.markdown_reimport import Differences, apply_differences, differences, mark_candidates
from selection.models import Corpus, MemoryUnit, Project, UnitStatus

# corpus.yaml's top-level "x-memory" (kept in Corpus.extras): {"lineage", "version", "source"}
LINEAGE = "x-memory"


@dataclass(frozen=True)
class MemoryImport:
    corpus: Corpus
    version: int  # 1 for the first import, then one more per import that changed something
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    superseded: tuple[tuple[str, str], ...] = ()  # (new unit, the unit it supersedes)
    frame_changes: tuple[str, ...] = ()  # frame fields whose value changed
    conflicts: tuple[Conflict, ...] = ()
    missing_modules: tuple[str, ...] = ()  # enabled in the manifest, absent on disk
    findings: ConflictResult | None = None  # the peer's conflict audit of the tree
    notes: tuple[str, ...] = ()  # what is kept for export but not selected
    sequences: range = field(default_factory=lambda: range(0))  # the MemoryChange sequences written


@dataclass(frozen=True)
class MemoryCheck:
    """What an import of DIR would do; nothing written."""

    read: MemoryRead
    findings: ConflictResult
    existing: bool  # the project exists: the differences are against its corpus
    differences: Differences | None

    @property
    def exit_code(self) -> int:
        return self.findings.exit_code


def _existing(project: str, corpus: str) -> Project | None:
    existing = Project.objects.select_related("corpus").filter(slug=project).first()
    if existing is not None and (existing.corpus.extras.get(LINEAGE) or {}).get("lineage") != corpus:
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
    return existing


def memory_check(directory: str | Path, *, corpus: str, project: str) -> MemoryCheck:
    """Read DIR and compare it with the project's corpus; CorpusError when an import would refuse."""
    read = read_memory(directory, project=project)
    existing = _existing(project, corpus)
    diff = None
    if existing is not None:
        diff = differences(existing, _records(read, name=existing.corpus.name, project=project, directory=directory))
    return MemoryCheck(read, analyze_conflicts(read), existing is not None, diff)


def memory_import(directory: str | Path, *, corpus: str, project: str, actor=None) -> MemoryImport:
    """Import DIR's docs/memory as corpus `corpus` with one project `project`, or apply what changed.

    Raises CorpusError naming the file and line of anything not understood.
    """
    read = read_memory(directory, project=project)
    findings = analyze_conflicts(read)
    missing = tuple(sorted(name for name, ids in read.frame["modules"].items() if not ids))
    existing = _existing(project, corpus)
    notes = tuple(read.notes)
    if existing is None:
        data_dir = tempfile.TemporaryDirectory()
        with data_dir as tmp:
            _write_interchange(Path(tmp), read, name=corpus, project=project, version=1, directory=directory)
            with transaction.atomic():
                imported = corpus_import(tmp, actor=actor)
                mark_candidates(
                    imported, [u["id"] for u in read.units if u[MC].get("unit_status") == UnitStatus.CANDIDATE]
                )
        return MemoryImport(
            corpus=imported,
            version=1,
            added=tuple(sorted(u["id"] for u in read.units)),
            conflicts=structural_conflicts(store.corpus_index(imported.pk).units),
            missing_modules=missing,
            findings=findings,
            notes=notes,
        )
    records = _records(read, name=existing.corpus.name, project=project, directory=directory)
    applied = apply_differences(existing, records, actor=actor, lineage_key=LINEAGE)
    corpus_row = Corpus.objects.get(pk=existing.corpus_id)
    return MemoryImport(
        corpus=corpus_row,
        version=int((corpus_row.extras.get(LINEAGE) or {}).get("version", 1)),
        added=applied.differences.added,
        removed=applied.differences.removed,
        changed=applied.differences.changed,
        superseded=applied.differences.superseded,
        frame_changes=applied.frame_changes,
        conflicts=structural_conflicts(store.corpus_index(corpus_row.pk).units),
        missing_modules=missing,
        findings=findings,
        notes=notes,
        sequences=applied.sequences,
    )


def _extras(read: MemoryRead, *, name: str, version: int, directory) -> dict:
    return {
        LINEAGE: {"lineage": name, "version": version, "source": str(Path(directory).resolve())},
        LAYOUT: read.layout,
        "x-memory-manifest": {
            "protocol": read.protocol,
            "prose": read.manifest.prose,
            "explicit_paths": read.manifest.explicit_paths,
            "budgets": [b.__dict__ for b in read.manifest.budgets],
        },
    }


def _write_interchange(path: Path, read: MemoryRead, *, name, project, version, directory) -> None:
    doc = {
        "name": name,
        "description": "Repo-native markdown memory.",
        "projects": [{"slug": project, "name": project, "frame": read.frame}],
    }
    doc.update(_extras(read, name=name, version=version, directory=directory))
    (path / "corpus.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    (path / "units.jsonl").write_text(
        "".join(json.dumps(u, ensure_ascii=False) + "\n" for u in read.units), encoding="utf-8"
    )


def _records(read: MemoryRead, *, name: str, project: str, directory):
    """The checked interchange records of `read` (the corpus reader's own checks apply)."""
    with tempfile.TemporaryDirectory() as tmp:
        _write_interchange(Path(tmp), read, name=name, project=project, version=0, directory=directory)
        data = read_corpus(tmp)
    return data


def memory_export(project: str, target: str | Path) -> list[Path]:
    """Write the project's memory back as the MemoryCustodian layout under target/docs/memory."""
    row = Project.objects.select_related("corpus").get(slug=project)
    layout = row.corpus.extras.get(LAYOUT)
    if not layout:
        raise CorpusError(
            [CorpusIssue("corpus.yaml", "", LAYOUT, f"{row.corpus.name} was not imported from a memory directory")]
        )
    units = {
        uid: {"title": title, "text": text, "extras": extras, "valid_to": valid_to}
        for uid, title, text, extras, valid_to in MemoryUnit.objects.filter(corpus=row.corpus, project=row).values_list(
            "uid", "title", "text", "extras", "valid_to"
        )
    }
    # a unit whose validity an import closed left the repository: it is not written back
    live = {uid: unit for uid, unit in units.items() if unit["valid_to"] is None}
    return write_layout(Path(target), layout_files(layout, live))
