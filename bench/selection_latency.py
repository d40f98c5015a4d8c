"""Engine selection latency per condition, split by stage through select()'s StageTimings, and an
approximate dense searcher's recall against exact search. No database.
"""

from __future__ import annotations

import copy
import time

import numpy as np

from selection.engine.index import CorpusIndex, NumpyExactSearcher
from selection.engine.pipeline import select
from selection.engine.timings import StageTimings, TimedStage
from selection.engine.types import SelectionRequest, WorkFrame

from .generator import SyntheticCorpus
from .stats import summary


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
    """select() p50/p95 with its split: retrieval, policy (the rest), trace records; and its CPU
    time (`cpu`), which a loaded machine inflates far less than the wall clock."""
    for request in requests[:8]:
        select(request, index)  # warm caches and code paths
    total, retrieval, records, policy, serialise, cpu = [], [], [], [], [], []
    timings = StageTimings()
    results = []
    for i in range(samples):
        request = requests[i % len(requests)]
        timings.clear()
        start, start_cpu = time.perf_counter(), time.thread_time()
        result = select(request, index, timings=timings)
        elapsed_ms = (time.perf_counter() - start) * 1e3
        cpu.append((time.thread_time() - start_cpu) * 1e3)
        retrieval_ms = timings.ms(TimedStage.RETRIEVAL)
        records_ms = timings.ms(TimedStage.TRACE_RECORDS)
        total.append(elapsed_ms)
        retrieval.append(retrieval_ms)
        records.append(records_ms)
        policy.append(elapsed_ms - retrieval_ms - records_ms)
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
        # this thread's CPU time: what the work costs, whatever else the machine's cores are doing
        cpu=summary(cpu),
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
