"""A generated corpus in the database, written by COPY and kept for later runs (bench-<size>).

Only the benchmark writes here; the rows look like an import's (projects with a promoted frame
version 1, units, links, tasks with a MUST ledger) so every service reads them as any corpus.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from django.db import connection, transaction
from pgvector.psycopg import register_vector

from authority.models import FrameVersion, Promotion
from governance.models import Proposal, ProposalState
from governance.services import audit_record
from selection.models import Corpus, LedgerEntry, MemoryUnit, Project, Task

from .generator import BenchTask, SyntheticCorpus

GENERATOR_VERSION = 1
BACKTEST_TASKS = 120  # tasks of the first project, so a backtest has replays to spread
_UNIT_COLUMNS = (
    "corpus_id", "project_id", "uid", "position", "evidence_class", "title", "text", "tokens",
    "created_at", "valid_from", "valid_to", "open_loop_status", "open_loop_kind", "paths",
    "subject", "facet", "root", "embedding", "extras",
)
_UNIT_TYPES = (
    "bigint", "bigint", "varchar", "integer", "varchar", "varchar", "text", "integer",
    "timestamptz", "timestamptz", "timestamptz", "varchar", "varchar", "varchar[]", "varchar",
    "varchar", "boolean", "vector", "jsonb",
)


@dataclass(frozen=True)
class StoredBench:
    corpus: Corpus
    project: Project  # the first project: its tasks and proposal serve the backtest
    proposal: Proposal
    reused: bool
    write_s: float | None  # seconds the write took, None when reused


def _stamp(bench: SyntheticCorpus) -> dict:
    return {"bench": {"size": bench.size, "seed": bench.seed, "generator": GENERATOR_VERSION}}


def bench_corpus(bench: SyntheticCorpus) -> StoredBench:
    """The stored copy of `bench`, written now unless an identical one is already there."""
    import time

    existing = Corpus.objects.filter(name=bench.name).first()
    if existing is not None:
        if existing.extras.get("bench") != _stamp(bench)["bench"]:
            raise RuntimeError(
                f'corpus "{bench.name}" exists but was not generated with these parameters'
            )
        project = Project.objects.get(corpus=existing, slug=bench.slugs[0])
        proposal = Proposal.objects.filter(project=project).order_by("id").first()
        return StoredBench(existing, project, proposal, True, None)
    started = time.perf_counter()
    with transaction.atomic():
        stored = _write(bench)
    return StoredBench(
        stored.corpus, stored.project, stored.proposal, False, time.perf_counter() - started
    )


def _write(bench: SyntheticCorpus) -> StoredBench:
    corpus = Corpus.objects.create(
        name=bench.name,
        description=f"Synthetic benchmark corpus: {bench.size} units (seed {bench.seed}).",
        standpoint=bench.standpoint,
        embedding_model="synthetic-clustered",
        extras=_stamp(bench),
    )
    projects: dict[str, Project] = {}
    for position, slug in enumerate(bench.slugs):
        project = Project.objects.create(corpus=corpus, slug=slug, name=slug, position=position)
        version = FrameVersion.objects.create(
            project=project, number=1, snapshot=bench.snapshots[slug], author_label="bench",
            origin="import",
        )
        Promotion.objects.create(project=project, frame_version=version, sequence=1)
        projects[slug] = project
    first = projects[bench.slugs[0]]
    base = FrameVersion.objects.get(project=first, number=1)
    # the proposal a backtest replays: design reviews prefer experiment results first
    snapshot = json.loads(json.dumps(bench.snapshots[first.slug]))
    review = snapshot["work_types"]["design-review"]
    snapshot["work_types"]["design-review"] = [review[2], review[0], review[1], *review[3:]]
    candidate = FrameVersion.objects.create(
        project=first, number=2, snapshot=snapshot, parent=base, author_label="bench",
        origin="proposal",
    )
    proposal = Proposal.objects.create(
        project=first, uid="bench-reorder", title="Design reviews lead with experiment results",
        patch={"work_types": {"design-review": snapshot["work_types"]["design-review"]}},
        base_version=base, frame_version=candidate, state=ProposalState.PROPOSED,
    )
    _copy_units(bench, corpus, projects)
    ids = dict(MemoryUnit.objects.filter(corpus=corpus).values_list("uid", "id"))
    _copy_links(bench, ids)
    tasks = bench.tasks + bench.project_tasks(first.slug, BACKTEST_TASKS)
    _write_tasks(tasks, corpus, projects, ids)
    audit_record(
        actor=None, project=None, action="corpus.imported", obj=corpus,
        summary=f"{bench.name}: {bench.size} generated units, {len(tasks)} tasks (benchmark)",
        payload={"units": bench.size, "tasks": len(tasks), **_stamp(bench)},
    )
    return StoredBench(corpus, first, proposal, False, None)


def _copy_units(bench: SyntheticCorpus, corpus: Corpus, projects: dict[str, Project]) -> None:
    raw = connection.connection  # the psycopg connection under Django's
    register_vector(raw)
    sql = f"COPY selection_memoryunit ({', '.join(_UNIT_COLUMNS)}) FROM STDIN WITH (FORMAT BINARY)"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        copy.set_types(list(_UNIT_TYPES))
        for i, unit in enumerate(bench.units):
            loop = unit.open_loop
            copy.write_row(
                (
                    corpus.pk, projects[unit.project].pk, unit.id, i + 1, unit.evidence_class,
                    unit.title, unit.text, unit.tokens, unit.created_at, unit.valid_from,
                    unit.valid_to, loop.status if loop else "", loop.kind if loop else "",
                    list(unit.paths), unit.subject or "", unit.facet or "", unit.root,
                    np.asarray(bench.vectors[i], dtype=np.float32), _jsonb({}),
                )
            )


def _jsonb(value):
    from psycopg.types.json import Jsonb

    return Jsonb(value)


def _copy_links(bench: SyntheticCorpus, ids: dict[str, int]) -> None:
    sql = "COPY selection_unitlink (source_id, target_id, kind, position) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for unit in bench.units:
            source = ids[unit.id]
            for kind, targets in (
                ("supersedes", unit.supersedes),
                ("echo_of", (unit.echo_of,) if unit.echo_of else ()),
                ("supports", unit.supports),
                ("refutes", unit.refutes),
            ):
                for position, target in enumerate(targets):
                    copy.write_row((source, ids[target], kind, position))


def _write_tasks(
    tasks: list[BenchTask], corpus: Corpus, projects: dict[str, Project], ids: dict[str, int]
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

