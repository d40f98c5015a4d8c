"""Selection latency per condition, split by stage through the StageTimings the serving function
fills in, and an approximate dense searcher's recall against exact search. No database.

Every selection is asked of selection.serving.select_for_user on the generated corpus (bench/held.py);
the latency is its engine select() stage (`TimedStage.SELECT`), split by the stages inside it.
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING

import numpy as np

from bench.generator import SyntheticCorpus
from bench.held import Ask, CpuTimings, held, serve, task_asks
from bench.stats import summary
from selection.engine.index import CorpusIndex, NumpyExactSearcher
from selection.engine.timings import TimedStage

if TYPE_CHECKING:
    from selection.serving.serve import HeldCorpus


def time_selection(corpus: HeldCorpus, asks: list[Ask], samples: int) -> dict:
    """select() p50/p95 with its split: retrieval, policy (the rest), trace records; and its CPU
    time (`cpu`), which a loaded machine inflates far less than the wall clock."""
    for ask in asks[:8]:
        serve(corpus, ask)  # warm caches and code paths
    total, retrieval, records, policy, serialise, cpu = [], [], [], [], [], []
    timings = CpuTimings()
    results = []
    for i in range(samples):
        timings.clear()
        result = serve(corpus, asks[i % len(asks)], timings)
        elapsed_ms = timings.ms(TimedStage.SELECT)
        cpu.append(timings.cpu_ms(TimedStage.SELECT))
        retrieval_ms = timings.ms(TimedStage.RETRIEVAL)
        records_ms = timings.ms(TimedStage.TRACE_RECORDS)
        total.append(elapsed_ms)
        retrieval.append(retrieval_ms)
        records.append(records_ms)
        policy.append(elapsed_ms - retrieval_ms - records_ms)
        if i < len(asks):
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
        # this thread's CPU time: what the work costs, whatever else the machine's cores are doing
        cpu=summary(cpu),
        candidates_mean=round(float(np.mean([len(r.trace.candidates) for r in results])), 1),
    )
    return out


def dense_recall(index: CorpusIndex, bench: SyntheticCorpus) -> dict:
    """An approximate searcher against exact cosine: recall@dense_k, and the C6 pools and bundles."""
    exact_index = copy.copy(index)
    exact_index.dense = NumpyExactSearcher(bench.vectors)  # units are generated in id order
    asks = task_asks(bench.tasks, "C6")
    approx_corpus, exact_corpus = held(bench.frames, index, asks), held(bench.frames, exact_index, asks)
    k = 60
    hits, pools, bundles = [], [], []
    for ask in asks:
        for vector in (ask.query_vector, ask.objective_vector):
            approx = set(index.dense.top(np.asarray(vector, dtype=np.float32), k).tolist())
            exact = set(exact_index.dense.top(np.asarray(vector, dtype=np.float32), k).tolist())
            hits.append(len(approx & exact) / max(len(exact), 1))
        a, e = serve(approx_corpus, ask), serve(exact_corpus, ask)
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
