"""Dense search in PostgreSQL (FG_DENSE_SEARCHER=pgvector-hnsw) over the stored bench corpus:
p50/p95 of one search (top 40), unscoped and scoped to the task's own project (a frame's scope:
the filter runs inside the iterative index scan), and recall@40 against exact cosine over the same
vectors. Where this server's pgvector cannot run on this CPU the part is
skipped, and says why (selection/memory/hnsw/support.py); the check runs before any vector code.
"""

from __future__ import annotations

import time

import numpy as np

from bench.database import StoredBench
from bench.generator import SyntheticCorpus
from bench.stats import summary
from bench.workload import DIMENSION
from selection.engine.index import NumpyExactSearcher
from selection.memory.hnsw.index import build_hnsw_index, index_options, pgvector_refusal, searcher_for_corpus
from selection.models import Project

K = 40


def time_hnsw(stored: StoredBench, bench: SyntheticCorpus, queries: int = 64) -> dict:
    refusal = pgvector_refusal()
    if refusal is not None:
        return {"skipped": refusal}
    out: dict = {}
    if index_options(DIMENSION) is None:  # one index per dimension, over every stored corpus
        begun = time.perf_counter()
        build_hnsw_index(dimension=DIMENSION)
        out["index_build_s"] = round(time.perf_counter() - begun, 1)
    searcher = searcher_for_corpus(stored.corpus.pk, {u.id: i for i, u in enumerate(bench.units)})
    exact = NumpyExactSearcher(bench.vectors)  # units are generated in id order
    out["searcher"] = searcher.name
    project_pk = dict(Project.objects.filter(corpus=stored.corpus).values_list("slug", "id"))
    tasks = bench.tasks[:queries]
    for task in tasks[:4]:  # warm the index pages and the connection
        searcher.search(np.asarray(task.query_vector, dtype=np.float32), K)
    timed, scoped, recalls, scoped_recalls, filled, shares = [], [], [], [], [], []
    for task in tasks:
        vector = np.asarray(task.query_vector, dtype=np.float32)
        allowed = searcher.project_ids == project_pk[task.project]  # the task's frame scope
        shares.append(float(allowed.mean()))
        begun = time.perf_counter()
        hits = searcher.search(vector, K)
        timed.append((time.perf_counter() - begun) * 1e3)
        truth = exact.top(vector, K)
        recalls.append(len(set(hits.top.tolist()) & set(truth.tolist())) / K)
        begun = time.perf_counter()
        in_scope = searcher.search_scoped(vector, K, allowed)
        scoped.append((time.perf_counter() - begun) * 1e3)
        masked = np.where(allowed, exact.scores(vector), -np.inf)
        want = min(K, int(allowed.sum()))
        scoped_truth = np.argsort(-masked, kind="stable")[:want]
        scoped_recalls.append(len(set(in_scope.top.tolist()) & set(scoped_truth.tolist())) / want)
        filled.append(len(in_scope.top) == want)
    out["search"] = summary(timed)
    out[f"recall_at_{K}"] = round(float(np.mean(recalls)), 4)
    out[f"recall_at_{K}_min"] = round(float(np.min(recalls)), 4)
    out["scoped"] = summary(scoped)
    out["scoped_share"] = round(float(np.mean(shares)), 4)
    out[f"scoped_recall_at_{K}"] = round(float(np.mean(scoped_recalls)), 4)
    out["scoped_pool_full"] = round(float(np.mean(filled)), 4)
    out["queries"] = len(tasks)
    return out
