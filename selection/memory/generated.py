"""A generated corpus written by COPY: the benchmark's way in (millions of units, no model run).

The rows look like an import's — projects with a promoted frame version 1, units with their
vectors, links, tasks with a MUST ledger — so every service reads them as any corpus. Frame
versions and promotions are written by authority.services, the audit row by authority.audit.
The COPY writers here (unit_copy_row, units_copy, links_copy) are the corpus import's and the
memory re-import's too: a unit becomes a row, and its links rows, in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.db import connection
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb

from authority.audit import audit_record
from authority.services import frame_version_create, promotion_create
from selection.engine.types import Unit
from selection.models import Corpus, LedgerEntry, LinkKind, MemoryUnit, Project, Task, UnitLink

UNIT_COLUMNS = (
    "corpus_id", "project_id", "uid", "position", "evidence_class", "title", "text", "tokens",
    "created_at", "valid_from", "valid_to", "open_loop_status", "open_loop_kind", "paths",
    "subject", "facet", "root", "embedding", "extras",
)
UNIT_TYPES = (
    "bigint", "bigint", "varchar", "integer", "varchar", "varchar", "text", "integer",
    "timestamptz", "timestamptz", "timestamptz", "varchar", "varchar", "varchar[]", "varchar",
    "varchar", "boolean", "vector", "jsonb",
)


@dataclass(frozen=True)
class GeneratedTask:
    """One replayable request with the units it needs (its MUST ledger)."""

    id: str
    project: str
    query: str
    objective: str
    work_type: str
    budget_tokens: int
    standpoint: datetime
    must: tuple[str, ...]


@dataclass(frozen=True)
class GeneratedCorpus:
    name: str
    description: str
    standpoint: datetime
    embedding_model: str
    extras: dict
    frames: dict[str, dict]  # project slug -> its frame snapshot, in project order
    units: Sequence[Unit]
    vectors: np.ndarray  # one row per unit
    tasks: Sequence[GeneratedTask]


def generated_corpus_write(data: GeneratedCorpus) -> tuple[Corpus, dict[str, Project]]:
    """Write `data` inside the caller's transaction; returns the corpus and its projects by slug."""
    corpus = Corpus.objects.create(
        name=data.name, description=data.description, standpoint=data.standpoint,
        embedding_model=data.embedding_model, extras=data.extras,
    )
    projects: dict[str, Project] = {}
    for position, (slug, snapshot) in enumerate(data.frames.items()):
        project = Project.objects.create(corpus=corpus, slug=slug, name=slug, position=position)
        version = frame_version_create(project=project, snapshot=snapshot, origin="import")
        promotion_create(project=project, frame_version=version)
        projects[slug] = project
    units_copy(
        unit_copy_row(corpus.pk, projects[unit.project].pk, unit, i + 1, data.vectors[i], {})
        for i, unit in enumerate(data.units)
    )
    ids = dict(MemoryUnit.objects.filter(corpus=corpus).values_list("uid", "id"))
    links_copy(data.units, ids)
    _write_tasks(data.tasks, corpus, projects, ids)
    audit_record(
        actor=None, project=None, action="corpus.imported", obj=corpus,
        summary=f"{data.name}: {len(data.units)} generated units, {len(data.tasks)} tasks (benchmark)",
        payload={"units": len(data.units), "tasks": len(data.tasks), **data.extras},
    )
    return corpus, projects


def units_copy(rows: Iterable[tuple]) -> None:
    """COPY memory unit rows (values in UNIT_COLUMNS order; the embedding a float32 array or
    None) inside the caller's transaction: one round trip instead of an INSERT per batch."""
    raw = connection.connection  # the psycopg connection under Django's
    register_vector(raw)
    sql = f"COPY {MemoryUnit._meta.db_table} ({', '.join(UNIT_COLUMNS)}) FROM STDIN WITH (FORMAT BINARY)"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        copy.set_types(list(UNIT_TYPES))
        for row in rows:
            copy.write_row(row)


def unit_copy_row(corpus_id: int, project_id: int, unit: Unit, position: int, vector, extras: dict) -> tuple:
    """The unit's row for units_copy, in UNIT_COLUMNS order (`vector` None: no embedding)."""
    loop = unit.open_loop
    return (
        corpus_id, project_id, unit.id, position, unit.evidence_class, unit.title, unit.text, unit.tokens,
        unit.created_at, unit.valid_from, unit.valid_to, loop.status if loop else "", loop.kind if loop else "",
        list(unit.paths), unit.subject or "", unit.facet or "", unit.root,
        None if vector is None else np.asarray(vector, dtype=np.float32), Jsonb(extras),
    )


def links_copy(units: Iterable[Unit], ids: dict[str, int]) -> None:
    """COPY the units' links (each kind's targets in their listed order) inside the caller's
    transaction; `ids` maps every unit id, linked or linking, to its row id."""
    sql = f"COPY {UnitLink._meta.db_table} (source_id, target_id, kind, position) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for unit in units:
            source = ids[unit.id]
            for kind, targets in (
                (LinkKind.SUPERSEDES, unit.supersedes),
                (LinkKind.ECHO_OF, (unit.echo_of,) if unit.echo_of else ()),
                (LinkKind.SUPPORTS, unit.supports),
                (LinkKind.REFUTES, unit.refutes),
            ):
                for position, target in enumerate(targets):
                    copy.write_row((source, ids[target], kind.value, position))


def _write_tasks(
    tasks: Sequence[GeneratedTask], corpus: Corpus, projects: dict[str, Project], ids: dict[str, int]
) -> None:
    rows = Task.objects.bulk_create(
        Task(
            corpus=corpus, project=projects[t.project], uid=t.id, position=i, family="bench",
            query=t.query, standpoint=t.standpoint, budget_tokens=t.budget_tokens,
            frame={"objective": t.objective, "work_type": t.work_type},
        )
        for i, t in enumerate(tasks)
    )
    LedgerEntry.objects.bulk_create(
        LedgerEntry(task=row, unit_id=ids[uid], label="MUST")
        for row, t in zip(rows, tasks, strict=True)
        for uid in t.must
    )
