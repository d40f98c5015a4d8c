"""Corpus import and export: a whole corpus in one transaction, checked in full before any write.

Where a row has no column for an "x-" key of the interchange format, the key is kept in the
nearest `extras` under a name the format can never use (no "x-" prefix), so export gives it back:

  MemoryUnit.extras["open_loop"]       "x-" keys of the unit's open_loop object
  Task.extras["signals"][signal id]    "x-" keys of each signal (TaskSignal has no extras)
  Corpus.extras["files"][file name]    top-level "x-" keys of tasks.yaml and proposals.yaml
  Corpus.extras["proposals"][id]       "x-" keys of each proposal (Proposal has no extras)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import IntegrityError, models, transaction

from authority.audit import audit_record
from authority.models import FrameVersion
from authority.services import frame_version_create, promotion_create
from selection import telemetry
from selection.corpus import (
    CorpusData,
    CorpusError,
    CorpusIssue,
    TaskFrameSpec,
    TaskSpec,
    UnitRecord,
    read_corpus,
)
from selection.memory import embeddings
from selection.memory.changes import corpus_sequence, memory_changes_append
from selection.memory.corpus_parts import ImportedCorpus, corpus_parts
from selection.memory.generated import links_copy, unit_copy_row, units_copy
from selection.models import Corpus, LedgerEntry, MemoryChangeKind, MemoryUnit, Project, Task, TaskSignal

__all__ = ["CorpusRefused", "corpus_check", "corpus_import"]

EMBED_BATCH = 64
WRITE_BATCH = 1000
# names in an extras mapping that the format cannot use (it only keeps "x-" keys)
OPEN_LOOP_EXTRAS = "open_loop"
SIGNAL_EXTRAS = "signals"
FILE_EXTRAS = "files"
PROPOSAL_EXTRAS = "proposals"

# progress(step, advanced, total): step is "embedding" or "writing"; advanced counts items just done
Progress = Callable[[str, int, int], None]


class CorpusRefused(CorpusError):
    """A well-formed corpus this installation cannot take: a name or slug in use, a long value."""


@telemetry.traced_import
def corpus_import(path: str | Path, *, progress: Progress | None = None, actor=None) -> Corpus:
    """Import the corpus at `path` whole or not at all; raises CorpusError listing every issue.

    The files are read and checked in full, and the installation checked for reused names, before
    anything is written; then embeddings are computed in batches (outside the transaction: they can
    take minutes) and every row is written in one transaction with its audit rows.
    """
    data = corpus_check(path)
    texts = [record.unit.text for record in data.units]
    vectors, model_name = _embed(texts, progress)
    try:
        with transaction.atomic():
            corpus = _write(data, vectors, model_name, progress, actor)
    except IntegrityError as error:
        # another import took the name or a slug between our check and our write
        refusals = _refusals(data)
        if refusals:
            raise CorpusRefused(refusals) from error
        raise
    return corpus


def corpus_check(path: str | Path) -> CorpusData:
    """Read and check the corpus at `path` in full, and the installation for reused names; writes
    nothing. Raises CorpusError (or CorpusRefused) listing every issue."""
    data = read_corpus(path)
    refusals = _refusals(data)
    if refusals:
        raise CorpusRefused(refusals)
    return data


def _refusals(data: CorpusData) -> list[CorpusIssue]:
    issues: list[CorpusIssue] = []
    existing = Corpus.objects.filter(name=data.name).first()
    if existing is not None:
        issues.append(
            CorpusIssue(
                "corpus.yaml",
                "",
                "name",
                f'a corpus named "{data.name}" is already loaded (imported '
                f"{existing.imported_at:%Y-%m-%d %H:%M} UTC); corpus names are unique across an "
                "installation",
            )
        )
    taken = dict(
        Project.objects.filter(slug__in=[spec.slug for spec in data.projects]).values_list(
            "slug", "corpus__name"
        )
    )
    for index, spec in enumerate(data.projects):
        if spec.slug in taken:
            issues.append(
                CorpusIssue(
                    "corpus.yaml",
                    f"projects[{index}].slug (line {spec.line})",
                    "slug",
                    f'project "{spec.slug}" already exists in corpus "{taken[spec.slug]}"; project '
                    "slugs are unique across an installation",
                )
            )
    issues += _too_long(data)
    return issues


def _limit(model: type[models.Model], column: str) -> int:
    field = model._meta.get_field(column)
    if isinstance(field, ArrayField):
        field = field.base_field
    return field.max_length  # type: ignore[union-attr, return-value]


def _too_long(data: CorpusData) -> list[CorpusIssue]:
    """Values the format allows but a column cannot hold: refused here, not as a database error."""
    # (file, location, field, value, model, column)
    checks: list[tuple[str, str, str, str, type[models.Model], str]] = [
        ("corpus.yaml", "", "name", data.name, Corpus, "name")
    ]
    for index, spec in enumerate(data.projects):
        where = f"projects[{index}] (line {spec.line})"
        checks.append(("corpus.yaml", where, "slug", spec.slug, Project, "slug"))
        checks.append(("corpus.yaml", where, "name", spec.name, Project, "name"))
    for record in data.units:
        unit, where = record.unit, f"line {record.line}"
        checks += [
            ("units.jsonl", where, "id", unit.id, MemoryUnit, "uid"),
            ("units.jsonl", where, "class", unit.evidence_class, MemoryUnit, "evidence_class"),
            ("units.jsonl", where, "title", unit.title, MemoryUnit, "title"),
            ("units.jsonl", where, "subject", unit.subject or "", MemoryUnit, "subject"),
            ("units.jsonl", where, "facet", unit.facet or "", MemoryUnit, "facet"),
        ]
        checks += [
            ("units.jsonl", where, "paths", glob, MemoryUnit, "paths") for glob in unit.paths
        ]
    for index, task in enumerate(data.tasks):
        where = f"tasks[{index}] (line {task.line})"
        checks += [
            ("tasks.yaml", where, "id", task.id, Task, "uid"),
            ("tasks.yaml", where, "family", task.family, Task, "family"),
            ("tasks.yaml", where, "pair", task.pair or "", Task, "pair"),
            (
                "tasks.yaml",
                where,
                "misassigned_work_type",
                task.misassigned_work_type or "",
                Task,
                "misassigned_work_type",
            ),
        ]
        checks += [("tasks.yaml", where, "signals", s.id, TaskSignal, "uid") for s in task.signals]
    issues = []
    for file, where, field, value, model, column in checks:
        limit = _limit(model, column)
        if limit is not None and len(value) > limit:
            issues.append(
                CorpusIssue(
                    file, where, field, f"{len(value)} characters; at most {limit} can be stored"
                )
            )
    for part in corpus_parts():
        issues += part.too_long(data)
    return issues


def _embed(texts: list[str], progress: Progress | None) -> tuple[list[Any], str]:
    total = len(texts)
    if not total:
        return [], ""

    def advanced(count: int) -> None:
        if progress is not None:
            progress("embedding", count, total)

    vectors = embeddings.embed_texts(texts, batch_size=EMBED_BATCH, progress=advanced)
    return list(vectors), embeddings.get_embedder().name


def _batches(items: list[Any], size: int = WRITE_BATCH) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _write(data: CorpusData, vectors: list[Any], model_name: str, progress, actor) -> Corpus:
    total = len(data.units) + len(data.tasks) + len(data.proposals)

    def advanced(count: int) -> None:
        if progress is not None and count:
            progress("writing", count, total)

    file_extras = {
        name: extras
        for name, extras in (
            ("tasks.yaml", data.tasks_extras),
            ("proposals.yaml", data.proposals_extras),
        )
        if extras
    }
    corpus_extras = dict(data.extras)
    if file_extras:
        corpus_extras[FILE_EXTRAS] = file_extras
    proposal_extras = {p.id: p.extras for p in data.proposals if p.extras}
    if proposal_extras:
        corpus_extras[PROPOSAL_EXTRAS] = proposal_extras
    corpus = Corpus.objects.create(
        name=data.name,
        description=data.description,
        standpoint=data.standpoint,
        embedding_model=model_name,
        extras=corpus_extras,
    )

    projects: dict[str, Project] = {}
    first_versions: dict[str, FrameVersion] = {}
    for position, spec in enumerate(data.projects):
        project = Project.objects.create(
            corpus=corpus, slug=spec.slug, name=spec.name, position=position, extras=spec.extras
        )
        version = frame_version_create(project=project, snapshot=spec.frame, origin="import")
        promotion_create(project=project, frame_version=version)
        audit_record(
            actor=actor,
            project=project,
            action="frame.imported",
            obj=version,
            summary=f"{spec.slug} v1 imported with corpus {data.name}",
            payload={"corpus": data.name, "frame_version": 1},
        )
        projects[spec.slug] = project
        first_versions[spec.slug] = version

    created = _write_units(corpus, projects, data.units, vectors, advanced, actor)
    # a task of the corpus is made at the import: replays see memory as the import left it
    memory_sequence = corpus_sequence(corpus.pk)

    for position, spec in enumerate(data.tasks):
        _write_task(corpus, projects[spec.project], created, spec, position, memory_sequence)
        advanced(1)

    carried: dict[str, set[str]] = {}
    for record in data.units:
        carried.setdefault(record.unit.project, set()).add(record.unit.evidence_class)
    imported = ImportedCorpus(data, corpus, projects, first_versions, carried, actor)
    for part in corpus_parts():
        part.write(imported, advanced)

    audit_record(
        actor=actor,
        project=None,
        action="corpus.imported",
        obj=corpus,
        summary=(
            f"{data.name}: {len(data.projects)} projects, {len(data.units)} units, "
            f"{len(data.tasks)} tasks, {len(data.proposals)} proposals"
        ),
        payload={
            "projects": [spec.slug for spec in data.projects],
            "units": len(data.units),
            "tasks": len(data.tasks),
            "proposals": [spec.id for spec in data.proposals],
            "embedding_model": model_name,
        },
    )
    return corpus


def _write_units(
    corpus: Corpus,
    projects: dict[str, Project],
    records: list[UnitRecord],
    vectors: list[Any],
    advanced: Callable[[int], None] | None = None,
    actor=None,
) -> dict[str, int]:
    """COPY the units and their links into `corpus`; returns the units' row ids by unit id.

    The corpus import and the memory re-import both write units here, so a unit becomes a row
    in one place. One COPY per batch, `advanced` told between them: a progress callback may write
    to the database (a job's row), which it cannot while a COPY holds the connection.
    """
    pairs = list(zip(records, vectors or [None] * len(records), strict=True))
    for batch in _batches(pairs):
        units_copy(_unit_copy_row(corpus, projects, record, vector) for record, vector in batch)
        if advanced is not None:
            advanced(len(batch))
    created = dict(MemoryUnit.objects.filter(corpus=corpus).values_list("uid", "id"))
    links_copy((record.unit for record in records), created)
    # one sequence range per import, the units in file order
    memory_changes_append(
        corpus.pk,
        [(created[record.unit.id], MemoryChangeKind.CREATED) for record in records],
        actor=actor,
        via="import",
        batch=corpus.name,
    )
    return created


def _unit_copy_row(corpus: Corpus, projects: dict[str, Project], record: UnitRecord, vector) -> tuple:
    extras = dict(record.extras)
    if record.open_loop_extras:
        extras[OPEN_LOOP_EXTRAS] = record.open_loop_extras
    return unit_copy_row(corpus.pk, projects[record.unit.project].pk, record.unit, record.line, vector, extras)


def _task_frame_json(frame: TaskFrameSpec | None) -> dict[str, Any]:
    return {} if frame is None else frame.document()


def _write_task(
    corpus: Corpus,
    project: Project,
    units: dict[str, int],
    spec: TaskSpec,
    position: int,
    memory_sequence: int,
) -> Task:
    extras = dict(spec.extras)
    signal_extras = {signal.id: signal.extras for signal in spec.signals if signal.extras}
    if signal_extras:
        extras[SIGNAL_EXTRAS] = signal_extras
    task = Task.objects.create(
        corpus=corpus,
        project=project,
        uid=spec.id,
        position=position,
        family=spec.family,
        pair=spec.pair or "",
        query=spec.query,
        standpoint=spec.standpoint,
        budget_tokens=spec.budget_tokens,
        frame=_task_frame_json(spec.frame),
        misassigned_work_type=spec.misassigned_work_type or "",
        routing=spec.routing,
        memory_sequence=memory_sequence,
        extras=extras,
    )
    TaskSignal.objects.bulk_create(
        TaskSignal(
            task=task, uid=signal.id, kind=signal.kind, content=signal.content, position=index
        )
        for index, signal in enumerate(spec.signals)
    )
    LedgerEntry.objects.bulk_create(
        LedgerEntry(task=task, unit_id=units[unit_id], label=label)
        for unit_id, label in spec.ledger.items()
    )
    return task

