"""A generated corpus in the database, written by COPY and kept for later runs (bench-<size>).

Only the benchmark writes here; the rows look like an import's (projects with a promoted frame
version 1, units, links, tasks with a MUST ledger) so every service reads them as any corpus.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.db import transaction

from authority.selectors import frame_version_by_number
from bench.generator import SyntheticCorpus
from governance.models import Proposal
from governance.proposals.services import proposal_import
from selection.corpus import ProposalSpec
from selection.memory.generated import GeneratedCorpus, GeneratedTask, generated_corpus_write
from selection.models import Corpus, Project

GENERATOR_VERSION = 1
BACKTEST_TASKS = 120  # tasks of the first project, so a backtest has replays to spread


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
    tasks = bench.tasks + bench.project_tasks(bench.slugs[0], BACKTEST_TASKS)
    corpus, projects = generated_corpus_write(
        GeneratedCorpus(
            name=bench.name,
            description=f"Synthetic benchmark corpus: {bench.size} units (seed {bench.seed}).",
            standpoint=bench.standpoint,
            embedding_model="synthetic-clustered",
            extras=_stamp(bench),
            frames={slug: bench.snapshots[slug] for slug in bench.slugs},
            units=bench.units,
            vectors=bench.vectors,
            tasks=[
                GeneratedTask(
                    id=t.id, project=t.project, query=t.query, objective=t.objective, work_type=t.work_type,
                    budget_tokens=t.budget_tokens, standpoint=t.standpoint, must=t.must,
                )
                for t in tasks
            ],
        )
    )
    first = projects[bench.slugs[0]]
    # the proposal a backtest replays: design reviews prefer experiment results first
    review = list(bench.snapshots[first.slug]["work_types"]["design-review"])
    reordered = [review[2], review[0], review[1], *review[3:]]
    carried: dict[str, set[str]] = {}
    for unit in bench.units:
        carried.setdefault(unit.project, set()).add(unit.evidence_class)
    proposal = proposal_import(
        project=first,
        base=frame_version_by_number(project=first, number=1),
        spec=ProposalSpec(
            id="bench-reorder", project=first.slug, title="Design reviews lead with experiment results",
            patch={"work_types": {"design-review": reordered}},
        ),
        carried=carried,
    )
    return StoredBench(corpus, first, proposal, False, None)
