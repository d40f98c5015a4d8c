"""The selection service end to end, as the API serves it: selection.serving.select_for_user with
the project lookup and the reader's role check, two query embeddings (cache cleared), select and the
durable trace write, each part read off the StageTimings the serving function fills in.

The caller is the user `bench-reader`, auditor of every bench project (granted once through
authority.services.role_grant, idempotent).
"""

from __future__ import annotations

import time

from django.contrib.auth import get_user_model

from authority.models import Role
from authority.services import role_grant
from bench.database import StoredBench
from bench.generator import SyntheticCorpus
from bench.stats import summary
from selection.engine.index import CorpusIndex
from selection.engine.timings import StageTimings, TimedStage
from selection.memory import index_cache, store
from selection.models import Project, Task
from selection.serving import query_vectors
from selection.serving.serve import select_for_user

PARTS = {"embed": TimedStage.EMBED, "select": TimedStage.SELECT, "trace_write": TimedStage.TRACE_WRITE}
WARM_RUNS = 3  # untimed first runs: the model, the index and the code paths warm up
READER = "bench-reader"


def bench_reader(stored: StoredBench):
    """The part's caller: auditor of every project of the stored corpus, created once and reused."""
    user, _ = get_user_model().objects.get_or_create(username=READER)
    for project in Project.objects.filter(corpus=stored.corpus):
        role_grant(user=user, project=project, role=Role.AUDITOR)
    return user


def time_service(stored: StoredBench, bench: SyntheticCorpus, runs: int) -> dict:
    """select_for_user p50/p95 over the stored synthetic tasks, with its embed, select and
    trace-write parts."""
    start = time.perf_counter()
    units, vectors = store.load_units(stored.corpus.pk)
    CorpusIndex.build(units, vectors)
    build_s = time.perf_counter() - start  # what a fresh process pays without the index cache
    del units, vectors
    store.forget_index(stored.corpus.pk)
    store.corpus_index(stored.corpus.pk)  # writes the index file if this corpus has none yet
    store.forget_index(stored.corpus.pk)  # a fresh process: nothing in memory, the file on disk
    start = time.perf_counter()
    store.corpus_index(stored.corpus.pk)
    load_s = time.perf_counter() - start
    tasks = list(Task.objects.filter(corpus=stored.corpus).select_related("project", "corpus"))
    tasks = [t for t in tasks if t.uid.startswith("t")][: len(bench.tasks)]
    reader = bench_reader(stored)
    totals: dict[str, list[float]] = {"total": [], **{name: [] for name in PARTS}}
    timings = StageTimings()
    query_vectors.embed_queries(["warm the model"])
    for i in range(runs + WARM_RUNS):
        task = tasks[i % len(tasks)]
        query_vectors.embed_cache_clear()
        timings.clear()
        work = store.work_frame_for_task(task)
        begun = time.perf_counter()
        select_for_user(
            user=reader, project_slug=task.project.slug, query=task.query, signals=work.signals,
            objective=work.objective, work_type=work.work_type, constraints=work.constraints,
            cites={name: list(ids) for name, ids in work.cites}, budget_tokens=task.budget_tokens,
            standpoint=task.standpoint, source="bench", timings=timings,
        )
        elapsed = time.perf_counter() - begun
        if i < WARM_RUNS:
            continue
        totals["total"].append(elapsed * 1e3)
        for name, stage in PARTS.items():
            totals[name].append(timings.ms(stage))
    out = summary(totals["total"])
    out.update({name: summary(values) for name, values in totals.items() if name != "total"})
    out["index_build_s"] = round(build_s, 2)
    out["index_load_s"] = round(load_s, 2)
    out["index_cached"] = index_cache.cache_dir() is not None
    out["dense_searcher"] = store.corpus_index(stored.corpus.pk).dense.name
    return out
