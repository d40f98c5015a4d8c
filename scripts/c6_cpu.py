"""C6 select() CPU time on the bench generator's corpus: thread CPU p50 over cycled tasks, BLAS at
one thread, and a digest of every task's bundle and trace (so a speed change can show it changed no
result). No database, no Django. Runs against whatever tree PYTHONPATH points at (it only uses
names every commit since the strong reference has), so it can time each commit of a bisect:

    PYTHONPATH=$PWD .venv/bin/python scripts/c6_cpu.py --size 10000 [--samples 256] [--profile out]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

if os.path.isdir("selection/bench"):  # a commit whose bench sits inside selection (a bisect)
    from selection.bench.generator import generate
    from selection.bench.runner import engine_requests
else:
    from task_requests import engine_requests

    from bench.generator import generate
from selection.engine.index import CorpusIndex
from selection.engine.pipeline import select


def _trace_digest(result) -> str:
    trace = result.trace.as_dict()
    return hashlib.sha256(json.dumps(trace, sort_keys=True, default=str).encode()).hexdigest()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--condition", default="C6")
    parser.add_argument("--blas", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1, help="repeat the timed loop, report each")
    parser.add_argument("--profile", help="write cProfile stats of the timed loop to this file")
    parser.add_argument("--no-digest", action="store_true")
    parser.add_argument("--reference", action="store_true",
                        help="also time bench.parts.reference's strong reference, interleaved with C6")
    parser.add_argument("--serve", action="store_true",
                        help="after the build, time N selections per stdin line 'N' (for A/B runs)")
    args = parser.parse_args(argv)

    with threadpool_limits(limits=args.blas):
        bench = generate(args.size, seed=args.seed, tasks=args.tasks)
        index = CorpusIndex.build(bench.units, bench.vectors)
        requests = engine_requests(bench, args.condition)
        for request in requests[:8]:
            select(request, index)
        out = {"size": args.size, "searcher": index.dense.name, "rounds": []}
        if not args.no_digest:
            bundles, traces = hashlib.sha256(), hashlib.sha256()
            for request in requests:
                result = select(request, index)
                bundles.update(result.bundle.digest.encode())
                traces.update(_trace_digest(result).encode())
            out["bundles"] = bundles.hexdigest()[:16]
            out["traces"] = traces.hexdigest()[:16]
        if args.serve:
            print(json.dumps(out), flush=True)
            at = 0
            for line in sys.stdin:
                cpu = []
                for _ in range(int(line)):
                    request = requests[at % len(requests)]
                    at += 1
                    start = time.thread_time()
                    select(request, index)
                    cpu.append((time.thread_time() - start) * 1e3)
                print(json.dumps(cpu), flush=True)
            return 0
        if args.reference:
            from bench.parts.reference import StrongReferenceRetriever

            reference = StrongReferenceRetriever([u.text for u in bench.units], index.dense)
            ours, theirs = [], []
            for i in range(args.samples):
                request, task = requests[i % len(requests)], bench.tasks[i % len(bench.tasks)]
                start = time.thread_time()
                select(request, index)
                middle = time.thread_time()
                reference.query(task.query, task.query_vector)
                ours.append((middle - start) * 1e3)
                theirs.append((time.thread_time() - middle) * 1e3)
            c6, ref = float(np.percentile(ours, 50)), float(np.percentile(theirs, 50))
            out["interleaved"] = {"c6_p50_ms": round(c6, 2), "reference_p50_ms": round(ref, 2),
                                  "ratio": round(c6 / ref, 2)}
        profiler = cProfile.Profile() if args.profile else None
        for _ in range(args.rounds):
            cpu = []
            if profiler:
                profiler.enable()
            for i in range(args.samples):
                request = requests[i % len(requests)]
                start = time.thread_time()
                select(request, index)
                cpu.append((time.thread_time() - start) * 1e3)
            if profiler:
                profiler.disable()
            out["rounds"].append(
                {"p50_ms": round(float(np.percentile(cpu, 50)), 2),
                 "p95_ms": round(float(np.percentile(cpu, 95)), 2)}
            )
        if profiler:
            profiler.dump_stats(args.profile)
            pstats.Stats(args.profile).sort_stats("cumulative").print_stats(40)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
