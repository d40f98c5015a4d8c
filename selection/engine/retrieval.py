"""Candidate retrieval at high recall: BM25 + dense fused by RRF, objective expansion, recency,
class and successor pulls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from .conditions import Condition
from .index import (
    CorpusIndex,
)
from .search import QueryHits, cosines, dense_pair, fuse, rrf, search
from .signals import in_effect
from .types import EngineConfig

RELEVANCE_MARGIN = 1e-8  # > twice round(x, 9)'s largest move: a wider shortlist, never a narrower


def by_relevance(
    pool: Pool,
    positions: Sequence[int] | np.ndarray,
    limit: int | None = None,
    accept: Callable[[int], bool] | None = None,
) -> list[int]:
    """Positions most relevant first: dense cosine to the query (plus the objective when it ran),
    then BM25 likewise (each rounded to 9 places), then position (unit id order). What orders
    every pull that has a choice. With `limit`, the first `limit` of that order that `accept`
    (when given) keeps.

    Computed a column at a time; only a shortlist is sorted exactly: the k best cosines, and every
    cosine within RELEVANCE_MARGIN of the k-th, hold the first k of the whole order (whatever lies
    below rounds below all k of them); k grows until `limit` accepted positions are found."""
    positions = np.asarray(positions, dtype=np.int64).reshape(-1)
    n = positions.size
    if n == 0:
        return []
    searches = [hits for hits in (pool.query, pool.objective) if hits is not None]
    if accept is None and limit is not None:
        positions = _bounded(searches, positions, max(limit, 0))
        n = positions.size
    # summed in float64 in the order one unit's Python sum would take: the same values
    cosine = np.zeros(n)
    for hits in searches:
        if hits.dense is not None:
            cosine = cosine + np.asarray(cosines(hits.dense, positions), dtype=np.float64)
    lexical = np.zeros(n)
    for hits in searches:
        lexical = lexical + hits.bm25.scores(positions)
    want = n if limit is None else max(limit, 0)
    k = min(max(want, 1), n)
    while True:
        if k >= n:
            shortlist = np.arange(n)
        else:
            kth = np.partition(cosine, n - k)[n - k]
            shortlist = np.flatnonzero(cosine >= kth - RELEVANCE_MARGIN)
        keys = sorted(
            zip(
                [-round(c, 9) for c in cosine[shortlist].tolist()],
                [-round(x, 9) for x in lexical[shortlist].tolist()],
                positions[shortlist].tolist(),
                strict=True,
            )
        )
        ordered = [key[2] for key in keys[:k]]
        chosen = ordered if accept is None else [p for p in ordered if accept(p)]
        if len(chosen) >= want or k >= n:
            return chosen[:want]
        k = min(k * 4, n)


BOUNDED_FROM = 512  # positions from which a pull's shortlist is bounded by compact scores first


def _bounded(searches, positions: np.ndarray, want: int) -> np.ndarray:
    """The positions that can be among the `want` first of by_relevance's order, found from an
    approximate searcher's bounds (DenseHits.bounds) without computing every exact cosine and BM25
    score: the want-th best lower bound of the summed cosine, L, is at most the want-th best exact
    sum, so whatever ranks in the first `want` (or within RELEVANCE_MARGIN of the want-th) has an
    upper bound of at least L − RELEVANCE_MARGIN. The same first `want` as over all positions
    (tests/selection/engine/test_engine_retrieval.py); all of them where no bound is offered."""
    n = positions.size
    dense = [hits.dense for hits in searches if hits.dense is not None]
    if n < BOUNDED_FROM or not dense or want <= 0 or want >= n:
        return positions
    low, high = np.zeros(n), np.zeros(n)
    for hits in dense:
        bound = hits.bounds(positions)
        if bound is None:
            return positions
        low, high = low + bound[0], high + bound[1]
    floor = np.partition(low, n - want)[n - want] - RELEVANCE_MARGIN
    return positions[high >= floor]


def _unpooled(pool: Pool, lists) -> np.ndarray:
    """The positions of `lists` (sorted, disjoint) that are not in the pool yet."""
    arrays = [np.asarray(items, dtype=np.int64) for items in lists if len(items)]
    if not arrays:
        return np.empty(0, dtype=np.int64)
    # in position order, as a merge of the lists gives: any exact cosines an approximate searcher
    # computes for them are computed in one batch, in that order
    merged = np.sort(np.concatenate(arrays))
    if not pool.score:
        return merged
    # the pool is a few dozen positions: binary search into them, not np.isin's sort of both
    pooled = np.sort(np.fromiter(pool.score, dtype=np.int64, count=len(pool.score)))
    where = np.minimum(np.searchsorted(pooled, merged), pooled.size - 1)
    return merged[pooled[where] != merged]


def _pulled_score(floor: float, place: int) -> float:
    """A pulled unit scores the floor, less 1 % per place in its pull's relevance order."""
    return floor * (1.0 - 0.01 * place)


@dataclass
class Pool:
    order: list[int] = field(default_factory=list)  # positions, in the order they entered
    score: dict[int, float] = field(default_factory=dict)  # normalised query score (pulled: floor)
    fused: dict[int, tuple[float, int]] = field(default_factory=dict)  # final RRF score, rank
    pulled_by: dict[int, str] = field(default_factory=dict)
    query: QueryHits | None = None
    objective: QueryHits | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, pos: int, score: float, pulled_by: str | None = None) -> None:
        self.order.append(pos)
        self.score[pos] = score
        if pulled_by is not None:
            self.pulled_by[pos] = pulled_by


def _cut(hits: QueryHits, size: int, config: EngineConfig) -> QueryHits:
    """`hits` as a search with pool size `size` returns them (its fused list cut there). A scoped
    search's lists are first cut at the pool size too (_scoped_depth), then fused again."""
    if hits.searched is not None and config.scope_depth_pool:
        return _scoped_depth(hits, size, config)
    return hits if len(hits.fused) <= size else replace(hits, fused=hits.fused[:size])


def _scoped_depth(hits: QueryHits, size: int, config: EngineConfig) -> QueryHits:
    """A scoped search fused from its lexical and dense lists cut at the pool size `size`.

    Unscoped, each retriever's list (lexical_k, dense_k: 60) runs deeper than the pool (40), and
    the store's other projects take part of that depth. A scope has no other projects to absorb it:
    a project of 60 units searched 60 deep puts every unit in both lists, so RRF ranks by the sum
    of reciprocal ranks down to the scope's last unit, and a unit strong in one list and absent
    from the other falls behind units that are weak in both. A scoped list is therefore as deep as
    the pool it fills (the round's pool size when the pool widens): what enters the fusion is the
    scope's head of each list, as the store's head is unscoped. Scope-intrinsic (a project's lists
    are cut the same in a store of many and alone), so its bundles stay its own."""
    lexical = hits.lexical[:size]
    dense = hits.dense.with_top(hits.dense_top[:size]) if hits.dense is not None else None
    return fuse(hits.bm25, lexical, dense, replace(config, pool_size=size), hits.skipped, hits.searched)


def build_pool(
    index: CorpusIndex,
    *,
    query: str,
    query_vector,
    objective: str,
    objective_vector,
    condition: Condition,
    preferences: Sequence[str],
    scope: frozenset[str],
    class_pull: int,
    standpoint: datetime | None,
    config: EngineConfig,
    open_loops: bool = False,
    searches: dict | None = None,
) -> Pool:
    """The candidate pool. `searches`, a dict the caller keeps between calls that differ only in
    `config.pool_size` (pool widening's rounds), holds the query's and the objective's searches,
    which depend on lexical_k and dense_k but not on the cut, so a wider round does not search
    again."""
    pool = Pool()
    expand = condition.objective_expansion and bool(objective.strip())
    # the exact searcher reads its matrix once for the query and the objective (_dense_pair)
    scoped = condition.scope_filter and config.scope_at_retrieval
    allowed = index.scope_mask(scope) if scoped else None
    rows = index.scope_rows(scope) if scoped else None
    searched = {} if searches is None else searches
    if "primary" not in searched:  # searched uncut: each round cuts the fused lists at its size
        uncut = replace(config, pool_size=config.lexical_k + config.dense_k)
        pair = (
            dense_pair(index, query_vector, objective_vector, config)
            if expand and allowed is None  # a scoped search scans only its scope
            else (None, None)
        )
        searched["primary"] = search(
            index, query, query_vector, uncut, allowed=allowed, rows=rows, searched=pair[0]
        )
        searched["secondary"] = (
            search(index, objective, objective_vector, uncut, allowed=allowed, rows=rows, searched=pair[1])
            if expand
            else None
        )
    primary = _cut(searched["primary"], config.pool_size, config)
    pool.query = primary
    fused = primary.fused
    skipped = set(primary.skipped)
    if expand:
        secondary = _cut(searched["secondary"], config.pool_size, config)
        skipped |= secondary.skipped
        pool.objective = secondary
        fused = rrf([[p for p, _ in primary.fused], [p for p, _ in secondary.fused]], config.rrf_k)
        fused = fused[: config.pool_size]
    n = len(fused)
    for i, (pos, score) in enumerate(fused):
        pool.add(pos, 1.0 - i / n)
        pool.fused[pos] = (score, i + 1)
    pool.counts["retrieved"] = n
    if rows is not None:
        pool.counts["scope_units"] = int(rows.size)  # what the scoped search ranked
        # the out-of-scope hits of the unscoped lexical lists, which took no place in the pool
        pool.counts["out_of_scope_skipped"] = len(skipped)

    if condition.recency:
        added = 0
        for pos in index.recency_order[: config.recency_additions]:
            if pos not in pool.score:
                pool.add(pos, config.recency_added_score, "recency")
                added += 1
        pool.counts["recency_added"] = added

    floor = min(pool.score.values(), default=config.recency_added_score) * config.class_pull_floor
    if condition.class_pull and class_pull > 0:
        pulled = 0
        projects = sorted(scope)
        for evidence_class in preferences:
            have = sum(
                1
                for pos in pool.order
                if index.units[pos].evidence_class == evidence_class
                and index.units[pos].project in scope
            )
            need = class_pull - have
            if need <= 0:
                continue
            lists = [index.by_project_class.get((p, evidence_class), ()) for p in projects]
            missing = _unpooled(pool, lists)
            # the class's most relevant units first (not the first ids)
            for j, pos in enumerate(by_relevance(pool, missing, need)):
                pool.add(pos, _pulled_score(floor, j), f"class_pull:{evidence_class}")
                pulled += 1
        pool.counts["class_pulled"] = pulled

    if condition.successor_pull and config.neighbour_pull_top > 0:
        # Chapter 7: what supports or refutes a strong candidate is evidence about it
        pulled = 0
        strong = [pos for pos, _ in fused if index.units[pos].project in scope][
            : config.neighbour_pull_top
        ]
        for pos in strong:
            unit = index.units[pos]
            # named for what the pulled unit is to the strong one: "refutes:x" refutes x
            linked = sorted(
                {(n, "supported_by") for n in unit.supports}
                | {(n, "supports") for n in index.links.supported_by.get(unit.id, ())}
                | {(n, "refuted_by") for n in unit.refutes}
                | {(n, "refutes") for n in index.links.refuted_by.get(unit.id, ())}
            )
            for neighbour_id, how in linked:
                npos = index.position.get(neighbour_id)
                if npos is None or npos in pool.score:
                    continue
                neighbour = index.units[npos]
                if neighbour.project not in scope or not in_effect(neighbour, standpoint):
                    continue
                score = pool.score[pos] * config.neighbour_pull_weight
                pool.add(npos, score, f"{how}:{unit.id}")
                pulled += 1
        pool.counts["neighbours_pulled"] = pulled

    if condition.successor_pull and open_loops and config.open_loop_pull > 0:
        # Chapter 9: the project's open loops, when the work type has a use for unfinished work
        loops = [
            pos
            for project in sorted(scope)
            for pos in index.open_loops.get(project, ())
            if pos not in pool.score and in_effect(index.units[pos], standpoint)
        ]
        chosen = by_relevance(pool, loops, config.open_loop_pull)
        for j, pos in enumerate(chosen):
            pool.add(pos, _pulled_score(floor, j), "open_loop")
        pool.counts["open_loops_pulled"] = len(chosen)

    if condition.successor_pull:
        pulled = 0
        i = 0
        while i < len(pool.order):  # grows while it runs, so chains of successors are followed
            pos = pool.order[i]
            i += 1
            for successor_id in index.successors(index.units[pos].id):
                spos = index.position[successor_id]
                if spos in pool.score or not in_effect(index.units[spos], standpoint):
                    continue
                pool.add(spos, pool.score[pos], f"successor_of:{index.units[pos].id}")
                pulled += 1
        pool.counts["successors_pulled"] = pulled
    return pool
