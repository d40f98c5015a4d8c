"""Interleaved A/B of C6 CPU time across source trees: one scripts/c6_cpu.py --serve process per
tree, each built once, then asked in turn for a batch of selections, so every tree sees the same
load on a shared machine. Prints each tree's thread-CPU p50/p95 over all its samples.

    .venv/bin/python scripts/c6_ab.py --size 10000 --rounds 8 TREE [TREE...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _reply(proc):
    """The next JSON line of a worker (anything else a tree prints on stdout is skipped)."""
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a worker ended: {proc.args} in {proc.cwd_}")
        if line[:1] in "[{":
            return json.loads(line)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args(argv)
    workers = []
    for tree in args.trees:
        env = dict(os.environ, PYTHONPATH=tree)
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "c6_cpu.py"), "--size", str(args.size),
             "--serve", "--no-digest"],
            cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        proc.cwd_ = tree
        workers.append(proc)
        _reply(proc)  # built one at a time: the builds do not overlap
    samples = [[] for _ in workers]
    for r in range(args.rounds):
        order = range(len(workers)) if r % 2 == 0 else reversed(range(len(workers)))
        for i in order:
            workers[i].stdin.write(f"{args.batch}\n")
            workers[i].stdin.flush()
            samples[i].extend(_reply(workers[i]))
    for proc in workers:
        proc.stdin.close()
        proc.wait()
    for tree, cpu in zip(args.trees, samples, strict=True):
        print(f"{tree}\tp50 {np.percentile(cpu, 50):.2f}\tp95 {np.percentile(cpu, 95):.2f} ms"
              f"\tn={len(cpu)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
