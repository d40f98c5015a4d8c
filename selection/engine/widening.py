"""Adaptive pool widening: the candidate pool grows when retrieval, not ranking,
is the bottleneck, that is when the pool's tail still scores near its head.

The fused list is cut at `pool_size`. When the last in-scope retrieved unit of the pool still has a
relevance of at least `pool_widen_tail` x the head's, the cut fell inside the relevant part of the
list, not after it: the pool is rebuilt `pool_widen_step` places wider, and again, until the tail
drops below that share of the head or the pool reaches `pool_widen_max`. Relevance is the
strongest dense cosine of the unit to the query or the objective (BM25 over its best when the
request carried no vector). Deterministic (no clock, no sampling); each round is recorded in the
retrieval stage's counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .index import CorpusIndex
from .retrieval import Pool
from .types import EngineConfig


def tail_ratio(pool: Pool, index: CorpusIndex, scope: frozenset[str] | None) -> float | None:
    """The relevance of the pool's last retrieved unit (in scope when `scope` is given) over the
    relevance of its best one; None when the pool holds no retrieved unit or its head scores 0."""
    retrieved = sorted(pool.fused, key=lambda pos: pool.fused[pos][1])
    if scope is not None:
        retrieved = [pos for pos in retrieved if index.units[pos].project in scope]
    if not retrieved:
        return None
    searches = [hits for hits in (pool.query, pool.objective) if hits is not None]
    dense = [hits.dense for hits in searches if hits.dense is not None]
    if dense:
        for hits in dense:
            hits.prefetch(retrieved)

        def relevance(pos: int) -> float:
            return max(hits.score(pos) for hits in dense)
    else:
        def relevance(pos: int) -> float:
            return max(float(hits.bm25[pos]) for hits in searches)

    head = max(relevance(pos) for pos in retrieved)
    if head <= 0:
        return None
    return relevance(retrieved[-1]) / head


def widen_pool(
    build: Callable[[EngineConfig], Pool],
    index: CorpusIndex,
    config: EngineConfig,
    scope: frozenset[str] | None,
) -> Pool:
    """`build(config)` once, then wider while the tail scores near the head (module docstring).

    The returned pool's counts record `pool_size` (the size it was built at) and, when it widened,
    `widened_from` and `widen_rounds`; `tail_ratio_pct` is the last tail/head ratio seen (x 100,
    rounded), so the trace shows why the rule stopped where it did."""
    pool = build(config)
    if config.pool_widen_max <= config.pool_size:
        return pool  # widening off: nothing to measure, nothing recorded
    size, rounds = config.pool_size, 0
    while True:
        ratio = tail_ratio(pool, index, scope)
        full = len(pool.fused) >= size  # a list shorter than the cut has nothing more to give
        if ratio is None or ratio < config.pool_widen_tail or not full:
            break
        if size >= config.pool_widen_max:
            break
        size = min(size + config.pool_widen_step, config.pool_widen_max)
        rounds += 1
        pool = build(replace(config, pool_size=size))
    if config.pool_widen_max > config.pool_size:
        pool.counts["pool_size"] = size
        if ratio is not None:
            pool.counts["tail_ratio_pct"] = round(100 * ratio)
        if rounds:
            pool.counts["widened_from"] = config.pool_size
            pool.counts["widen_rounds"] = rounds
    return pool
