"""One text's search: BM25, lexical and dense lists fused by RRF, over the corpus or inside a scope."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from .index import (
    BM25Hits,
    CorpusIndex,
    DenseHits,
    ScopedScores,
    normalise_vector,
    searched_by_rows,
    tokenise,
    top_k,
)
from .types import EngineConfig

K = TypeVar("K", bound=Hashable)


def rrf(rankings: Sequence[Sequence[K]], k: int = 60) -> list[tuple[K, float]]:
    """Reciprocal rank fusion: sum of 1 / (k + rank) over the rankings; ties by key."""
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


@dataclass
class QueryHits:
    """One text run through both retrievers (positions are index positions)."""

    bm25: BM25Hits | ScopedScores  # the lexical search: any unit's BM25Okapi score on demand
    lexical: np.ndarray  # top lexical_k positions with a positive score
    dense: DenseHits | None  # top positions and any unit's cosine; None without a vector
    dense_top: np.ndarray
    fused: list[tuple[int, float]]  # truncated to the pool size
    skipped: frozenset[int] = frozenset()  # out-of-scope units of the unscoped lexical list
    searched: int | None = None  # units the scoped search ranked (the scope's); None: unscoped

    def bm25_scores(self, positions: Sequence[int]) -> list[float]:
        """The BM25 score of each position (exact; computed for these positions alone)."""
        return self.bm25.scores(positions).tolist()

    def rank_maps(self) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        lexical = {int(p): r for r, p in enumerate(self.lexical, start=1)}
        dense = {int(p): r for r, p in enumerate(self.dense_top, start=1)}
        fused = {p: r for r, (p, _) in enumerate(self.fused, start=1)}
        return lexical, dense, fused


def search(
    index: CorpusIndex,
    text: str,
    vector,
    config: EngineConfig,
    allowed: np.ndarray | None = None,
    rows: np.ndarray | None = None,
    searched: DenseHits | None = None,
) -> QueryHits:
    """BM25 and dense hits for one text.

    With `allowed` (a boolean mask over positions: the frame's scope; `rows`, its positions
    ascending, when the caller has them), both retrievers rank only allowed units, so out-of-scope
    hits never take a place in the pool (_search_scope). `searched` may pass the unscoped dense hits
    of `vector`, computed elsewhere (`_dense_pair`)."""
    tokens = tokenise(text)
    if allowed is not None:
        return _search_scope(index, tokens, vector, config, allowed, rows)
    bm25 = index.bm25.search(tokens, config.lexical_k)
    lexical = bm25.top
    hits: DenseHits | None = None
    if searched is not None:
        hits = searched
    elif vector is not None and index.dense is not None:
        searcher = index.dense
        query = normalise_vector(vector, searcher.dimension)
        if hasattr(searcher, "search"):
            hits = searcher.search(query, config.dense_k)
        else:
            full = np.asarray(searcher.scores(query))
            hits = DenseHits(top_k(full, config.dense_k), full=full)
    return fuse(bm25, lexical, hits, config, frozenset(), None)


def dense_pair(index: CorpusIndex, query_vector, objective_vector, config: EngineConfig):
    """The query's and the objective's dense hits from one scan, where the searcher can
    (`search_many`: the exact searcher reads its matrix once for both); (None, None) otherwise."""
    searcher = index.dense
    many = getattr(searcher, "search_many", None)
    if many is None or query_vector is None or objective_vector is None:
        return None, None
    vectors = [normalise_vector(v, searcher.dimension) for v in (query_vector, objective_vector)]
    first, second = many(vectors, config.dense_k)
    return first, second


def fuse(bm25, lexical, hits, config, skipped, searched) -> QueryHits:
    if hits is not None:
        dense_top = hits.top
        fused = rrf([lexical.tolist(), dense_top.tolist()], config.rrf_k)
    else:
        dense_top = np.empty(0, dtype=np.int64)
        fused = [
            (int(p), 1.0 / (config.rrf_k + r)) for r, p in enumerate(lexical.tolist(), start=1)
        ]
    return QueryHits(bm25, lexical, hits, dense_top, fused[: config.pool_size], skipped, searched)


def _search_scope(index: CorpusIndex, tokens, vector, config: EngineConfig, allowed, rows) -> QueryHits:
    """Both retrievers over a scope only; ties by position, as unscoped.

    BM25 scores the scope's units with the scope's own statistics (ScopedScores: the scores an
    index of the scope alone gives). Dense: a scope of at most 1/SCOPE_ROWS_SHARE of the corpus
    and SCOPE_ROWS_MAX units is scored by its rows (exact cosine, even on an IVF corpus); a larger
    one by the searcher's scan, masked (_in_scope). `skipped`: the out-of-scope units of the
    unscoped lexical list (the store's top lexical_k), the hits the pool did not spend a place on
    (the unscoped dense list is not searched for it: that is the scan the rows path avoids)."""
    rows = np.flatnonzero(allowed) if rows is None else rows
    bm25 = ScopedScores(index, tokens, rows, allowed)
    lexical = rows[top_k(bm25.local, config.lexical_k, positive_only=True)]
    unscoped = index.bm25.search(tokens, config.lexical_k).top
    skipped = frozenset(int(p) for p in unscoped[~allowed[unscoped]])
    hits: DenseHits | None = None
    searcher = index.dense
    if vector is not None and searcher is not None:
        query = normalise_vector(vector, searcher.dimension)
        cosines = getattr(searcher, "cosines", None)
        if cosines is not None and searched_by_rows(rows, len(index)):
            local = np.asarray(cosines(query, rows))
            top = rows[top_k(local, config.dense_k)]
            known = dict(zip(rows.tolist(), local.tolist(), strict=True))  # no row scored twice
            hits = DenseHits(top, known=known, exact=lambda positions: cosines(query, positions))
        elif hasattr(searcher, "search"):
            hits = _in_scope(searcher, query, allowed, config.dense_k)
        else:
            full = np.asarray(searcher.scores(query))
            hits = DenseHits(_masked_top(full, allowed, config.dense_k), full=full)
    return fuse(bm25, lexical, hits, config, skipped, int(rows.size))


def _masked_top(full: np.ndarray, allowed: np.ndarray, k: int) -> np.ndarray:
    """The k best allowed positions by cosine (position order breaks ties)."""
    masked = np.where(allowed, full, -np.inf)
    top = top_k(masked, k)
    return top[np.isfinite(masked[top])]


def _in_scope(searcher, query: np.ndarray, allowed: np.ndarray, k: int) -> DenseHits:
    """Dense hits restricted to allowed positions: a searcher with `search_scoped` filters inside
    its own scan (pgvector's iterative HNSW scan); exact searchers rank every allowed cosine; any
    other approximate one is asked for 4x more hits at a time until k allowed ones are found or the
    corpus is exhausted."""
    scoped = getattr(searcher, "search_scoped", None)
    if scoped is not None:  # a searcher that filters inside its own scan (pgvector's HNSW)
        return scoped(query, k, allowed)
    hits = searcher.search(query, k)
    if hits.full is not None:
        return hits.with_top(_masked_top(hits.full, allowed, k))
    want, size = k, int(getattr(searcher, "size", allowed.size))
    while True:
        top = [int(p) for p in hits.top if allowed[p]]
        if len(top) >= k or want >= size:
            return hits.with_top(np.asarray(top[:k], dtype=np.int64))
        want = min(want * 4, size)
        hits = searcher.search(query, want)


def cosines(dense: DenseHits, positions: Sequence[int]) -> list[float]:
    """`dense.score(p)` of each position, computed in one product where the searcher has to."""
    return dense.scores_of(positions)
