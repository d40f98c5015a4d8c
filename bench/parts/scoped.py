"""Scope at retrieval at a hundred projects: one project's C6 selections inside a store of 100
projects that share one vocabulary, against the same project's units alone.

Every project of the store writes on every topic with the same words and the same embedding
centres, so query-only retrieval finds every project's units on the query's topic. The figures:
must-include recall (the task's `must` units admitted, folded ones included), the share of tasks
whose bundle is byte-identical both ways, and select() latency of the same requests against both
indexes (wall clock, and the thread's CPU time, which the machine's other load does not inflate;
both the serving function's select() stage), with scope at retrieval on, timed alternately so the
machine's load falls on both alike; and, for contrast, the store's recall with scope at retrieval
off (the engine's default: out-of-scope hits take the pool's places and eligibility rules them
out). Every selection goes through selection.serving.select_for_user (bench/held.py). No database.

`python -m bench.parts.scoped [PER_PROJECT [TASKS [SAMPLES]]]` runs this part alone and prints its
targets (`manage.py bench` runs it after the sizes and checks the same targets).
"""

from __future__ import annotations

import time

import numpy as np

from bench.generator import generate
from bench.held import CpuTimings, held, serve, task_asks
from bench.stats import check, part_main, summary
from bench.workload import BenchTask
from selection.engine.index import CorpusIndex
from selection.engine.timings import TimedStage
from selection.engine.types import EngineConfig

PROJECTS = 100
RECALL_TOLERANCE = 0.0  # the store's recall equals the project's alone
SAME_BUNDLE_MIN = 1.0  # and so does every bundle (the scope's own BM25 statistics: same scores)
P95_RATIO_MAX = 1.2  # the store's C6 p95 / the project's alone (within 20 %)


def must_recall(result, must: tuple[str, ...]) -> float:
    admitted = {uid for item in result.bundle.items for uid in item.sources}
    return sum(1 for uid in must if uid in admitted) / len(must) if must else 1.0


def time_scoped(per_project: int, seed: int, tasks: int, samples: int) -> dict:
    """Recall and latency of one project's C6 tasks in the 100-project store and alone."""
    size = PROJECTS * per_project
    begun = time.perf_counter()
    store = generate(size, seed=seed, tasks=0, projects=PROJECTS, shared_topics=True)
    project = store.slugs[0]
    work: list[BenchTask] = store.project_tasks(project, tasks)
    generate_s = time.perf_counter() - begun
    begun = time.perf_counter()
    store_index = CorpusIndex.build(store.units, store.vectors)
    rows = [i for i, unit in enumerate(store.units) if unit.project == project]
    alone_index = CorpusIndex.build([store.units[i] for i in rows], store.vectors[rows])
    build_s = time.perf_counter() - begun
    store.tasks = work
    asks = task_asks(work, "C6")
    scoped, unscoped = EngineConfig(scope_at_retrieval=True), EngineConfig(scope_at_retrieval=False)
    in_store = held(store.frames, store_index, asks, config=scoped)
    alone = held(store.frames, alone_index, asks, config=scoped)
    in_store_unscoped = held(store.frames, store_index, asks, config=unscoped)

    recall_store, recall_alone, recall_unscoped, same_bundle = [], [], [], []
    for task, ask in zip(work, asks, strict=True):
        from_store, from_alone = serve(in_store, ask), serve(alone, ask)
        recall_store.append(must_recall(from_store, task.must))
        recall_alone.append(must_recall(from_alone, task.must))
        recall_unscoped.append(must_recall(serve(in_store_unscoped, ask), task.must))
        same_bundle.append(from_store.bundle.digest == from_alone.bundle.digest)

    timed_store, timed_alone, cpu_store, cpu_alone = [], [], [], []
    timings = CpuTimings()
    for i in range(samples):
        ask = asks[i % len(asks)]
        first, second = (in_store, timed_store, cpu_store), (alone, timed_alone, cpu_alone)
        for corpus, out, cpu in (first, second) if i % 2 == 0 else (second, first):
            timings.clear()
            serve(corpus, ask, timings)
            cpu.append(timings.cpu_ms(TimedStage.SELECT))
            out.append(timings.ms(TimedStage.SELECT))
    store_t, alone_t = summary(timed_store), summary(timed_alone)
    store_cpu, alone_cpu = summary(cpu_store), summary(cpu_alone)
    retrieval = serve(in_store, asks[0]).trace
    counts = dict(next(st for st in retrieval.stages if st.stage == "retrieval").detail)
    return {
        "projects": PROJECTS,
        "units": size,
        "project": project,
        "project_units": len(rows),
        "tasks": len(work),
        "generate_s": round(generate_s, 2),
        "index_build_s": round(build_s, 2),
        "recall_store": round(float(np.mean(recall_store)), 4),
        "recall_alone": round(float(np.mean(recall_alone)), 4),
        "recall_store_unscoped": round(float(np.mean(recall_unscoped)), 4),
        "same_bundle": round(float(np.mean(same_bundle)), 4),
        "store": store_t,
        "alone": alone_t,
        "p95_ratio": round(store_t["p95_ms"] / alone_t["p95_ms"], 3),
        "store_cpu": store_cpu,
        "alone_cpu": alone_cpu,
        "p95_ratio_cpu": round(store_cpu["p95_ms"] / alone_cpu["p95_ms"], 3),
        "scope_units": int(counts.get("scope_units", 0)),
        "out_of_scope_skipped": int(counts.get("out_of_scope_skipped", 0)),
    }


def targets(scoped: dict) -> list[dict]:
    """The part's targets on a time_scoped() result: the store's must-include recall equals
    the project's alone (and, stronger, every bundle does), at a p95 within 20 % (wall clock)."""
    at = f"in a {scoped['projects']}-project store of {scoped['units']} units"
    gap = round(abs(scoped["recall_store"] - scoped["recall_alone"]), 4)
    return [
        check(f"|C6 must-include recall {at} - alone|", gap, "<=", RECALL_TOLERANCE, ""),
        check(f"C6 bundles {at} identical to alone (share)", scoped["same_bundle"], ">=",
              SAME_BUNDLE_MIN, ""),
        check(f"C6 p95 {at} / alone", scoped["p95_ratio"], "<=", P95_RATIO_MAX, "x"),
    ]


def describe(scoped: dict) -> str:
    return (
        f"[scoped] {scoped['project']} ({scoped['project_units']} units) in a "
        f"{scoped['projects']}-project store of {scoped['units']} units sharing one vocabulary: "
        f"C6 recall {scoped['recall_store']} (alone {scoped['recall_alone']}; scope at retrieval "
        f"off {scoped['recall_store_unscoped']}); same bundle {scoped['same_bundle']}; p95 "
        f"{scoped['store']['p95_ms']} ms (alone {scoped['alone']['p95_ms']} ms, ratio "
        f"{scoped['p95_ratio']}); CPU p95 {scoped['store_cpu']['p95_ms']} ms (alone "
        f"{scoped['alone_cpu']['p95_ms']} ms, ratio {scoped['p95_ratio_cpu']}); out-of-scope hits "
        f"skipped in the first task's retrieval {scoped['out_of_scope_skipped']}"
    )


if __name__ == "__main__":  # python -m bench.parts.scoped [PER_PROJECT [TASKS [SAMPLES]]]
    part_main(lambda per_project, tasks, samples: time_scoped(per_project, 7, tasks, samples),
              [200, 32, 256], describe, targets)
