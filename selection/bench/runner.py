"""The benchmark: engine selection per condition, the reference, the service end to end, backtest
replays and import, at each size; one JSON document, printed as it goes.

Timings are wall-clock medians and 95th percentiles over repeated requests (the synthetic tasks,
cycled). The engine never reads the clock: stage times come from wrapping two of the pipeline's
module functions (build_pool: retrieval; _records: the frozen trace records) for the run.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import os
import platform
import resource
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from selection.engine import pipeline
from selection.engine.index import IVF_THRESHOLD, CorpusIndex, NumpyExactSearcher
from selection.engine.pipeline import select
from selection.engine.types import SelectionRequest, WorkFrame

from .generator import SyntheticCorpus, generate

CONDITIONS = ("C0", "C4", "C6")
TARGETS = {  # size -> C6 selection p95 limit in ms (issue 7)
    10_000: 5.0,
    100_000: 15.0,
    1_000_000: 50.0,
}
E2E_P95_LIMIT_MS = 80.0  # at 100k, two query embeddings and a durable trace write included
REPLAYS_PER_WORKER_MIN = 150.0  # at 100k
IMPORT_UNITS_PER_S_MIN = 100.0
REFERENCE_SPEEDUP_MIN = 10.0  # at 100k


@dataclass
class BenchOptions:
    sizes: tuple[int, ...] = (10_000,)
    seed: int = 7
    tasks: int = 64
    samples: int = 256  # selections timed per condition
    reference_queries: int = 24
    database: bool = True  # the service, backtest and import parts need the database
    db_max_size: int = 100_000  # larger corpora skip the database parts (said in the output)
    e2e_runs: int = 40
    workers: tuple[int, ...] = (1, 2)
    import_units: int = 10_000  # units imported with the real model, once per run (first size)
    blas_threads: int | None = 1
    dense_threshold: int | None = IVF_THRESHOLD
    extra: dict = field(default_factory=dict)


def summary(values_ms: list[float]) -> dict:
    arr = np.asarray(values_ms, dtype=np.float64)
    if arr.size == 0:
        return {"p50_ms": None, "p95_ms": None, "n": 0}
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p95_ms": round(float(np.percentile(arr, 95)), 3),
        "n": int(arr.size),
    }


class StageClock:
    """Times the pipeline's retrieval (build_pool) and trace-record (_records) calls from outside."""

    def __init__(self):
        self.retrieval = 0.0
        self.records = 0.0

    @contextlib.contextmanager
    def installed(self) -> Iterator[StageClock]:
        build_pool, records = pipeline.build_pool, pipeline._records

        def timed_pool(*args, **kwargs):
            start = time.perf_counter()
            try:
                return build_pool(*args, **kwargs)
            finally:
                self.retrieval += time.perf_counter() - start

        def timed_records(*args, **kwargs):
            start = time.perf_counter()
            try:
                return records(*args, **kwargs)
            finally:
                self.records += time.perf_counter() - start

        pipeline.build_pool, pipeline._records = timed_pool, timed_records
        try:
            yield self
        finally:
            pipeline.build_pool, pipeline._records = build_pool, records


def engine_requests(bench: SyntheticCorpus, condition: str) -> list[SelectionRequest]:
    return [
        SelectionRequest(
            project_frame=bench.frames[t.project],
            work_frame=WorkFrame(
                objective=t.objective, work_type=t.work_type, standpoint=t.standpoint
            ),
            query=t.query,
            budget_tokens=t.budget_tokens,
            condition=condition,
            query_vector=t.query_vector,
            objective_vector=t.objective_vector,
        )
        for t in bench.tasks
    ]


def time_selection(index: CorpusIndex, requests: list[SelectionRequest], samples: int) -> dict:
    """select() p50/p95 with its split: retrieval, policy (the rest), trace records."""
    for request in requests[:8]:
        select(request, index)  # warm caches and code paths
    total, retrieval, records, policy, serialise = [], [], [], [], []
    clock = StageClock()
    results = []
    with clock.installed():
        for i in range(samples):
            request = requests[i % len(requests)]
            clock.retrieval = clock.records = 0.0
            start = time.perf_counter()
            result = select(request, index)
            elapsed = time.perf_counter() - start
            total.append(elapsed * 1e3)
            retrieval.append(clock.retrieval * 1e3)
            records.append(clock.records * 1e3)
            policy.append((elapsed - clock.retrieval - clock.records) * 1e3)
            if i < len(requests):
                results.append(result)
    for result in results:
        start = time.perf_counter()
        result.trace.as_dict()
        serialise.append((time.perf_counter() - start) * 1e3)
    out = summary(total)
    out.update(
        retrieval=summary(retrieval),
        policy=summary(policy),
        trace_build=summary(records),
        trace_serialise=summary(serialise),
        candidates_mean=round(float(np.mean([len(r.trace.candidates) for r in results])), 1),
    )
    return out


def dense_recall(index: CorpusIndex, bench: SyntheticCorpus) -> dict:
    """An approximate searcher against exact cosine: recall@dense_k, and the C6 pools and bundles."""
    exact_index = copy.copy(index)
    exact_index.dense = NumpyExactSearcher(bench.vectors)  # units are generated in id order
    k = 60
    hits, pools, bundles = [], [], []
    for request in engine_requests(bench, "C6"):
        for vector in (request.query_vector, request.objective_vector):
            approx = set(index.dense.top(np.asarray(vector, dtype=np.float32), k).tolist())
            exact = set(exact_index.dense.top(np.asarray(vector, dtype=np.float32), k).tolist())
            hits.append(len(approx & exact) / max(len(exact), 1))
        a, e = select(request, index), select(request, exact_index)
        pa = {c.unit_id for c in a.trace.candidates}
        pe = {c.unit_id for c in e.trace.candidates}
        pools.append(len(pa & pe) / max(len(pe), 1))
        bundles.append(a.bundle.digest == e.bundle.digest)
    return {
        "searcher": index.dense.name,
        f"recall_at_{k}": round(float(np.mean(hits)), 4),
        f"recall_at_{k}_min": round(float(np.min(hits)), 4),
        "c6_pool_recall": round(float(np.mean(pools)), 4),
        "c6_same_bundle": round(float(np.mean(bundles)), 4),
        "queries": len(hits),
    }


def time_reference(bench: SyntheticCorpus, queries: int) -> dict:
    from .reference import ReferenceRetriever

    start = time.perf_counter()
    reference = ReferenceRetriever([u.text for u in bench.units], bench.vectors)
    build_s = time.perf_counter() - start
    times = []
    for i in range(queries):
        task = bench.tasks[i % len(bench.tasks)]
        start = time.perf_counter()
        reference.query(task.query, task.query_vector)
        times.append((time.perf_counter() - start) * 1e3)
    del reference
    out = summary(times)
    out["build_s"] = round(build_s, 2)
    return out


# --- the database parts ------------------------------------------------------------------------


def time_service(stored, bench: SyntheticCorpus, runs: int) -> dict:
    """run_selection end to end: frame lookup, two query embeddings (cache cleared), select, and
    the durable trace write; each part timed by wrapping the service module's own names."""
    from selection import services, store
    from selection.models import Task

    start = time.perf_counter()
    store.corpus_index(stored.corpus.pk)
    load_s = time.perf_counter() - start
    tasks = list(Task.objects.filter(corpus=stored.corpus).select_related("project", "corpus"))
    tasks = [t for t in tasks if t.uid.startswith("t")][: len(bench.tasks)]
    parts: dict[str, float] = {}

    def timing(name: str, fn: Callable) -> Callable:
        def wrapped(*args, **kwargs):
            begun = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                parts[name] = parts.get(name, 0.0) + time.perf_counter() - begun

        return wrapped

    originals = (services.embed_queries, services.select, services.trace_write)
    services.embed_queries = timing("embed", services.embed_queries)
    services.select = timing("select", services.select)
    services.trace_write = timing("trace_write", services.trace_write)
    totals: dict[str, list[float]] = {"total": [], "embed": [], "select": [], "trace_write": []}
    try:
        originals[0](["warm the model"])
        for i in range(runs + 3):
            task = tasks[i % len(tasks)]
            services.embed_cache_clear()
            parts.clear()
            work = store.work_frame_for_task(task)
            begun = time.perf_counter()
            services.run_selection(
                project=task.project, query=task.query, work_frame=work,
                budget_tokens=task.budget_tokens, standpoint=task.standpoint, task=task,
                source="bench",
            )
            elapsed = time.perf_counter() - begun
            if i < 3:
                continue
            totals["total"].append(elapsed * 1e3)
            for name in ("embed", "select", "trace_write"):
                totals[name].append(parts.get(name, 0.0) * 1e3)
    finally:
        services.embed_queries, services.select, services.trace_write = originals
    out = summary(totals["total"])
    out.update({name: summary(values) for name, values in totals.items() if name != "total"})
    out["index_load_s"] = round(load_s, 2)
    out["dense_searcher"] = store.corpus_index(stored.corpus.pk).dense.name
    return out


def _replay_worker(backtest_id: int, pairs: list[tuple[int, str]], ready, go, results) -> None:
    from django.db import connections

    from backtest import services as backtest_services

    ready.wait()
    go.wait()
    begun = time.perf_counter()
    for task_id, side in pairs:
        backtest_services.replay_one(backtest_id=backtest_id, task_id=task_id, side=side)
    results.put((len(pairs), time.perf_counter() - begun))
    connections.close_all()


def time_backtest(stored, workers: int) -> dict:
    """Task replays per second through backtest.services.replay_one, in `workers` forked processes
    (what a Celery worker with --concurrency=N runs), each replay writing its trace and metrics."""
    from django.db import connections

    from authority.models import FrameVersion
    from backtest import services as backtest_services
    from backtest.models import Backtest, BacktestStatus, ReplaySide
    from selection import services, store
    from selection.engine.pipeline import ENGINE_VERSION
    from selection.models import Task

    project = stored.project
    tasks = list(Task.objects.filter(project=project).order_by("position", "id"))
    baseline = FrameVersion.objects.get(project=project, number=1)
    backtest = Backtest.objects.create(
        proposal=stored.proposal, baseline_version=baseline,
        candidate_version=stored.proposal.frame_version, condition="C6",
        task_ids=[t.pk for t in tasks],
        task_set_digest=backtest_services.backtest_task_set_digest(project=project),
        engine_version=ENGINE_VERSION, gates={}, status=BacktestStatus.QUEUED,
    )
    # a worker that has run a while: index built, queries embedded, rows cached (inherited by fork)
    store.corpus_index(project.corpus_id)
    for task in tasks:
        work = store.work_frame_for_task(task)
        services.embed_query(task.query)
        if work.objective:
            services.embed_query(work.objective)
        backtest_services._task_context(task.pk)
    store.frame_of_version(baseline.pk)
    store.frame_of_version(stored.proposal.frame_version_id)
    backtest_services._maps(project.corpus_id, store.corpus_index(project.corpus_id))
    pairs = [(t.pk, side) for t in tasks for side in ReplaySide.values]
    connections.close_all()
    context = multiprocessing.get_context("fork")
    ready, go = context.Barrier(workers + 1), context.Barrier(workers + 1)
    results = context.Queue()
    procs = [
        context.Process(
            target=_replay_worker, args=(backtest.pk, pairs[w::workers], ready, go, results)
        )
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    ready.wait()
    begun = time.perf_counter()
    go.wait()
    done = [results.get(timeout=600) for _ in procs]
    wall = time.perf_counter() - begun
    for proc in procs:
        proc.join()
    replays = sum(n for n, _ in done)
    return {
        "replays": replays,
        "wall_s": round(wall, 3),
        "replays_per_s": round(replays / wall, 1),
        "per_worker": round(replays / wall / workers, 1),
        "implementation": "backtest.services.replay_one in forked worker processes",
    }


def time_import(bench_size: int, seed: int, units: int) -> dict:
    """corpus_import of a generated corpus with real model embeddings, rolled back afterwards."""
    from django.db import transaction

    from selection.corpus.records import CorpusData, ProjectSpec, UnitRecord
    from selection.corpus.writer import write_corpus
    from selection.importing import corpus_import

    small = generate(units, seed=seed + 1, tasks=1)
    rename = {slug: slug.replace("bench-", "bench-import-") for slug in small.slugs}
    data = CorpusData(
        name=f"bench-import-{units}",
        description="benchmark import",
        standpoint=small.standpoint,
        projects=tuple(
            ProjectSpec(
                slug=rename[slug], name=slug, frame={**small.snapshots[slug], "scope": [rename[slug]]},
                project_frame=replace(small.frames[slug], project=rename[slug], scope=(rename[slug],)),
            )
            for slug in small.slugs
        ),
        units=tuple(
            UnitRecord(unit=replace(u, project=rename[u.project]), line=i + 1)
            for i, u in enumerate(small.units)
        ),
    )
    phases: dict[str, float] = {}
    marks = {"start": 0.0}

    def progress(step: str, advanced: int, total: int) -> None:
        now = time.perf_counter()
        phases.setdefault(f"{step}_first", now)
        phases[f"{step}_last"] = now

    class Rollback(Exception):
        pass

    with tempfile.TemporaryDirectory() as directory:
        write_corpus(data, directory)
        marks["start"] = time.perf_counter()
        try:
            with transaction.atomic():
                corpus_import(directory, progress=progress)
                marks["end"] = time.perf_counter()
                raise Rollback
        except Rollback:
            pass
    total = marks["end"] - marks["start"]
    embed_s = phases.get("writing_first", marks["end"]) - marks["start"]
    return {
        "units": units,
        "seconds": round(total, 2),
        "units_per_s": round(units / total, 1),
        "embedding_s": round(embed_s, 2),
        "embedding": "all-MiniLM-L6-v2 (the packaged model)",
    }


# --- the run ------------------------------------------------------------------------------------


def machine() -> dict:
    import numpy

    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo if "model name" in ln), "")
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_size(size: int, options: BenchOptions, say: Callable[[str], None]) -> dict:
    out: dict = {"units": size}
    begun = time.perf_counter()
    bench = generate(size, seed=options.seed, tasks=options.tasks)
    out["generate_s"] = round(time.perf_counter() - begun, 2)
    begun = time.perf_counter()
    index = CorpusIndex.build(bench.units, bench.vectors, dense_threshold=options.dense_threshold)
    out["index_build_s"] = round(time.perf_counter() - begun, 2)
    out["dense_searcher"] = index.dense.name
    say(f"[{size}] generated in {out['generate_s']} s, indexed in {out['index_build_s']} s "
        f"({index.dense.name})")
    out["selection"] = {}
    for condition in CONDITIONS:
        timing = time_selection(index, engine_requests(bench, condition), options.samples)
        out["selection"][condition] = timing
        say(f"[{size}] {condition}: p50 {timing['p50_ms']} ms, p95 {timing['p95_ms']} ms "
            f"(retrieval p50 {timing['retrieval']['p50_ms']}, policy {timing['policy']['p50_ms']},"
            f" trace records {timing['trace_build']['p50_ms']}, trace as_dict "
            f"{timing['trace_serialise']['p50_ms']}; {timing['candidates_mean']} candidates)")
    if not isinstance(index.dense, NumpyExactSearcher):
        out["dense_recall"] = dense_recall(index, bench)
        say(f"[{size}] {index.dense.name} against exact: {out['dense_recall']}")
    queries = options.reference_queries if size < 1_000_000 else max(3, options.reference_queries // 4)
    out["reference"] = time_reference(bench, queries)
    c6 = out["selection"]["C6"]["p50_ms"]
    ref = out["reference"]["p50_ms"]
    out["ratio_vs_reference"] = round(c6 / ref, 4)
    say(f"[{size}] reference (rank_bm25 + numpy exact + RRF, query only): p50 {ref} ms, "
        f"p95 {out['reference']['p95_ms']} ms, built in {out['reference']['build_s']} s; "
        f"ours/reference = {out['ratio_vs_reference']} ({ref / c6:.1f}x faster)")
    out["backtest_replays_per_s"] = None
    if options.database and size <= options.db_max_size:
        out.update(_database_parts(bench, options, say))
    elif options.database:
        note = (f"database parts skipped above {options.db_max_size} units (--db-max-size): "
                "writing and loading the corpus would dominate the run")
        out["database_note"] = note
        say(f"[{size}] {note}")
    del index, bench
    out["peak_rss_mb"] = peak_rss_mb()
    say(f"[{size}] peak RSS so far {out['peak_rss_mb']} MB")
    return out


def _database_parts(bench: SyntheticCorpus, options: BenchOptions, say) -> dict:
    from .database import bench_corpus

    out: dict = {}
    stored = bench_corpus(bench)
    out["database_corpus"] = {
        "name": stored.corpus.name, "reused": stored.reused,
        "write_s": None if stored.write_s is None else round(stored.write_s, 2),
    }
    say(f"[{bench.size}] corpus {stored.corpus.name} "
        + ("reused" if stored.reused else f"written by COPY in {stored.write_s:.1f} s"))
    e2e = time_service(stored, bench, options.e2e_runs)
    out["end_to_end"] = e2e
    say(f"[{bench.size}] end to end (run_selection, 2 embeddings, durable trace): p50 "
        f"{e2e['p50_ms']} ms, p95 {e2e['p95_ms']} ms (embed p50 {e2e['embed']['p50_ms']}, "
        f"select {e2e['select']['p50_ms']}, trace write {e2e['trace_write']['p50_ms']}; "
        f"index loaded in {e2e['index_load_s']} s)")
    rates: dict[str, float] = {}
    details: dict[str, dict] = {}
    for workers in options.workers:
        result = time_backtest(stored, workers)
        rates[str(workers)] = result["replays_per_s"]
        details[str(workers)] = result
        say(f"[{bench.size}] backtest, {workers} worker(s): {result['replays_per_s']} replays/s "
            f"({result['per_worker']} per worker, {result['replays']} replays)")
    out["backtest_replays_per_s"] = rates
    out["backtest"] = details
    if options.import_units > 0 and not options.extra.get("imported"):
        options.extra["imported"] = True  # once per run, at the first size with a database
        imported = time_import(bench.size, options.seed, min(bench.size, options.import_units))
        out["import"] = imported
        say(f"[{bench.size}] import with embeddings: {imported['units_per_s']} units/s "
            f"({imported['units']} units in {imported['seconds']} s, embedding "
            f"{imported['embedding_s']} s)")
    return out


def targets(doc: dict) -> list[dict]:
    """Issue 7's targets against what was measured (sizes not run are left out)."""
    checks = []
    sizes = doc["sizes"]
    for size, limit in TARGETS.items():
        if str(size) in sizes:
            value = sizes[str(size)]["selection"]["C6"]["p95_ms"]
            checks.append(_check(f"C6 selection p95 at {size}", value, "<=", limit, "ms"))
    at100k = sizes.get("100000", {})
    if at100k.get("end_to_end"):
        checks.append(_check("end-to-end p95 at 100000", at100k["end_to_end"]["p95_ms"], "<=",
                             E2E_P95_LIMIT_MS, "ms"))
    if at100k.get("backtest"):
        for workers, result in at100k["backtest"].items():
            checks.append(_check(f"backtest replays/s per worker at 100000, {workers} worker(s)",
                                 result["per_worker"], ">=", REPLAYS_PER_WORKER_MIN, "/s"))
    if at100k.get("reference"):
        speedup = round(1 / at100k["ratio_vs_reference"], 1)
        checks.append(_check("speed-up over the reference at 100000", speedup, ">=",
                             REFERENCE_SPEEDUP_MIN, "x"))
    for entry in sizes.values():
        if entry.get("import"):
            checks.append(_check(f"import units/s with embeddings ({entry['import']['units']} units)",
                                 entry["import"]["units_per_s"], ">=", IMPORT_UNITS_PER_S_MIN, "/s"))
    return checks


def _check(name: str, value: float, op: str, limit: float, unit: str) -> dict:
    met = value <= limit if op == "<=" else value >= limit
    return {"target": name, "value": value, "limit": f"{op} {limit} {unit}", "met": bool(met)}


def run(options: BenchOptions, say: Callable[[str], None] = print) -> dict:
    from threadpoolctl import threadpool_limits

    doc: dict = {"machine": machine(), "options": {
        "seed": options.seed, "tasks": options.tasks, "samples": options.samples,
        "blas_threads": options.blas_threads, "dense_threshold": options.dense_threshold,
    }, "sizes": {}}
    say(f"machine: {doc['machine']['cpus']} CPUs ({doc['machine']['cpu_model']}), load "
        f"{doc['machine']['load_average_at_start']}; BLAS threads {options.blas_threads or 'default'}")
    limits = threadpool_limits(options.blas_threads) if options.blas_threads else contextlib.nullcontext()
    with limits:
        for size in sorted(options.sizes):
            doc["sizes"][str(size)] = run_size(size, options, say)
    doc["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    doc["targets"] = targets(doc)
    for check in doc["targets"]:
        say(f"target {'MET   ' if check['met'] else 'MISSED'} {check['target']}: "
            f"{check['value']} (limit {check['limit']})")
    return doc
