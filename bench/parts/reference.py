"""What a user would otherwise write for query-only hybrid retrieval, in two strengths.

- `ReferenceRetriever` (naive): rank_bm25's BM25Okapi + exact numpy cosine with a full argsort + RRF.
- `StrongReferenceRetriever` (careful): rank-bm25-rs (the Rust drop-in, bit-identical scores) +
  the very dense searcher our engine uses (exact below the IVF threshold, the IVF above) +
  argpartition for the lexical top-k + RRF, top 40.

Both are timed, never used: the benchmark divides our C6 time (which does far more: two queries,
pulls, signals, policy, coalescing, budget and a full trace) by theirs.
"""

from __future__ import annotations

import time

import numpy as np
from rank_bm25 import BM25Okapi
from rank_bm25_rs import BM25Okapi as RustBM25Okapi

from bench.generator import SyntheticCorpus
from bench.stats import summary
from selection.engine.index import DenseSearcher, tokenise


class ReferenceRetriever:
    def __init__(self, texts: list[str], vectors: np.ndarray, *, k: int = 60, pool: int = 40):
        self.bm25 = BM25Okapi([tokenise(t) for t in texts])
        matrix = np.asarray(vectors, dtype=np.float32)
        self.matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        self.k, self.pool = k, pool

    def query(self, text: str, vector) -> list[int]:
        scores = self.bm25.get_scores(tokenise(text))
        lexical = [int(i) for i in np.argsort(-scores, kind="stable")[: self.k] if scores[i] > 0]
        q = np.asarray(vector, dtype=np.float32)
        cosine = self.matrix @ (q / np.linalg.norm(q))
        dense = [int(i) for i in np.argsort(-cosine, kind="stable")[: self.k]]
        fused: dict[int, float] = {}
        for ranking in (lexical, dense):
            for rank, pos in enumerate(ranking, start=1):
                fused[pos] = fused.get(pos, 0.0) + 1.0 / (60 + rank)
        return sorted(fused, key=lambda p: (-fused[p], p))[: self.pool]


class StrongReferenceRetriever:
    def __init__(self, texts: list[str], dense: DenseSearcher, *, k: int = 60, pool: int = 40):
        self.bm25 = RustBM25Okapi([tokenise(t) for t in texts])
        self.dense = dense
        self.k, self.pool = k, pool

    def query(self, text: str, vector) -> list[int]:
        scores = np.asarray(self.bm25.get_scores(tokenise(text)))
        k = min(self.k, len(scores))
        kth = -np.partition(-scores, k - 1)[k - 1] if k else np.inf
        head = np.flatnonzero((scores >= kth) & (scores > 0))  # ties at the k-th score kept
        lexical = sorted((int(i) for i in head), key=lambda i: (-scores[i], i))[: self.k]
        q = np.asarray(vector, dtype=np.float32)
        dense = [int(i) for i in self.dense.top(q / np.linalg.norm(q), self.k)]
        fused: dict[int, float] = {}
        for ranking in (lexical, dense):
            for rank, pos in enumerate(ranking, start=1):
                fused[pos] = fused.get(pos, 0.0) + 1.0 / (60 + rank)
        return sorted(fused, key=lambda p: (-fused[p], p))[: self.pool]


def time_reference(bench: SyntheticCorpus, queries: int, dense: DenseSearcher | None = None) -> dict:
    """A reference's query p50/p95 over the synthetic tasks, and the seconds its build took:
    the naive one, or the strong one when given the engine's dense searcher."""
    start = time.perf_counter()
    texts = [u.text for u in bench.units]
    reference = (ReferenceRetriever(texts, bench.vectors) if dense is None
                 else StrongReferenceRetriever(texts, dense))
    build_s = time.perf_counter() - start
    times, cpu = [], []
    for i in range(queries):
        task = bench.tasks[i % len(bench.tasks)]
        start, start_cpu = time.perf_counter(), time.thread_time()
        reference.query(task.query, task.query_vector)
        times.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.thread_time() - start_cpu) * 1e3)
    del reference
    out = summary(times)
    out["cpu"] = summary(cpu)
    out["build_s"] = round(build_s, 2)
    return out
