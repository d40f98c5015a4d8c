"""Where C6's CPU goes: thread CPU per stage (wrapped functions, inclusive), mean ms per select().

    PYTHONPATH=$PWD .venv/bin/python scripts/c6_stages.py [--size 10000]
"""

from __future__ import annotations

import argparse
import collections
import functools
import time

import numpy as np
from task_requests import engine_requests
from threadpoolctl import threadpool_limits

from bench.generator import generate
from bench.parts.reference import StrongReferenceRetriever
from selection.engine import pipeline, retrieval
from selection.engine.index import CorpusIndex, tokenise

SPENT: dict[str, float] = collections.defaultdict(float)


def wrap(module, name, label=None):
    original = getattr(module, name)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        start = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[label or name] += time.thread_time() - start

    setattr(module, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=256)
    args = parser.parse_args()
    with threadpool_limits(limits=1):
        bench = generate(args.size, seed=7, tasks=64)
        index = CorpusIndex.build(bench.units, bench.vectors)
        requests = engine_requests(bench, "C6")
        dense = type(index.dense)
        wrap(dense, "search", "dense.search")
        wrap(type(index.bm25), "search", "bm25.search")
        wrap(retrieval, "search", "retrieval.search (both)")
        wrap(retrieval, "by_relevance")
        wrap(retrieval, "_dense_pair", "dense pair (C4+)")
        wrap(retrieval, "build_pool")
        wrap(retrieval, "_unpooled")
        for name in ("widen_pool", "_query_head", "_compute_signals", "retrieval_parts",
                     "apply_eligibility", "rank", "coalesce", "admit_within_budget",
                     "candidate_records", "_context_trace", "route", "structural_conflicts",
                     "render_bundle", "_ladder", "_bundle_order"):
            wrap(pipeline, name)
        reference = StrongReferenceRetriever([u.text for u in bench.units], index.dense)
        for request in requests[:8]:
            pipeline.select(request, index)
        SPENT.clear()
        total = theirs = 0.0
        for i in range(args.samples):
            start = time.thread_time()
            pipeline.select(requests[i % len(requests)], index)
            middle = time.thread_time()
            task = bench.tasks[i % len(bench.tasks)]
            reference.query(task.query, task.query_vector)
            total += middle - start
            theirs += time.thread_time() - middle
        # the strong reference's parts, on their own: rank-bm25-rs's scores and one dense top
        for i in range(args.samples):
            task = bench.tasks[i % len(bench.tasks)]
            start = time.thread_time()
            reference.bm25.get_scores(tokenise(task.query))
            middle = time.thread_time()
            reference.dense.top(np.asarray(task.query_vector, dtype=np.float32), reference.k)
            SPENT["ref: bm25 get_scores"] += middle - start
            SPENT["ref: one dense top"] += time.thread_time() - middle
    n = args.samples
    print(f"select total {total / n * 1e3:.2f} ms ({index.dense.name}); strong reference, "
          f"interleaved {theirs / n * 1e3:.2f} ms: ratio {total / theirs:.2f}")
    for name, spent in sorted(SPENT.items(), key=lambda kv: -kv[1]):
        print(f"  {name:28s} {spent / n * 1e3:6.2f}")


if __name__ == "__main__":
    main()
