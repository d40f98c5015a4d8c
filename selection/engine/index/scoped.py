"""Search restricted to a scope's rows: BM25 and exact cosine over the in-scope positions only.

A scope that holds a small share of the corpus (one project of a hundred) is searched by its own
rows, so a query costs what the scope costs, not what the store costs:

  - BM25: the scope's share of the postings (ScopePostings: per term, its in-scope rows and their
    precomputed weights) is found once per (scope, term) and kept with the index; a query adds the same
    posting weights, in the same token order, as BM25Index.scores() adds them, so a row's score is
    bit-identical to the full scan's. A unit outside the scope is scored by one binary search per
    term into that term's postings (sorted by position).
  - dense: the searcher's `cosines(query, positions)` over the rows (exact, whatever the searcher).

Ties break by position as everywhere else (rows are ascending, so a local index orders like a
position). Any other unit's score is computed on demand (a pulled out-of-scope successor still
records its true BM25 score and cosine).
"""

from __future__ import annotations

from collections.abc import Sequence
from weakref import WeakKeyDictionary

import numpy as np

from .bm25 import BM25Index

SCOPE_ROWS_SHARE = 4  # a scope of at most 1/4 of the corpus ...
SCOPE_ROWS_MAX = 4096  # ... and at most this many units is searched by its rows, else masked


def searched_by_rows(rows: np.ndarray, size: int) -> bool:
    """Whether a scope of `rows` is searched by its own rows rather than a masked full scan (a
    large scope is cheaper to mask: a contiguous scan, or the IVF's probe over-fetched)."""
    return rows.size <= SCOPE_ROWS_MAX and rows.size * SCOPE_ROWS_SHARE <= size


def bm25_at(bm25: BM25Index, tokens: Sequence[str], positions: np.ndarray) -> np.ndarray:
    """BM25Okapi scores of `positions` only (any order), bit-identical to bm25.scores(tokens)."""
    positions = np.asarray(positions, dtype=np.int64)
    score = np.zeros(positions.size)
    if positions.size == 0:
        return score
    for word in tokens:
        tid = bm25.vocab.get(word)
        if tid is None:
            continue
        postings = bm25.postings[tid]
        if postings.size == 0:
            continue
        at = np.minimum(np.searchsorted(postings, positions), postings.size - 1)
        hit = postings[at] == positions
        if hit.any():
            score[hit] += bm25.weights[tid][at[hit]]
    return score


class ScopePostings:
    """One scope's share of the BM25 postings, kept with the index and filled term by term as
    queries ask for them: a term's in-scope rows (local indices into `rows`) and their precomputed
    weights, found once by one binary search per row into the term's postings (sorted by
    position), so a later query touches only the scope's postings of its terms."""

    def __init__(self, bm25: BM25Index, rows: np.ndarray):
        self.rows = rows
        self._bm25 = bm25
        self._terms: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def term(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        found = self._terms.get(tid)
        if found is None:
            postings, rows = self._bm25.postings[tid], self.rows
            if postings.size == 0 or rows.size == 0:
                found = (np.zeros(0, dtype=np.int64), np.zeros(0))
            else:
                at = np.minimum(np.searchsorted(postings, rows), postings.size - 1)
                docs = np.flatnonzero(postings[at] == rows)
                found = (docs, self._bm25.weights[tid][at[docs]])
            self._terms[tid] = found
        return found

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """The scope's rows' BM25 scores: the same weights added in the same token order as
        BM25Index.scores(), so the same bits."""
        score = np.zeros(self.rows.size)
        vocab = self._bm25.vocab
        for word in tokens:
            tid = vocab.get(word)
            if tid is not None:
                docs, weights = self.term(tid)
                score[docs] += weights
        return score


_POSTINGS: WeakKeyDictionary = WeakKeyDictionary()  # CorpusIndex -> {id(rows): ScopePostings}


def scope_postings(index, rows: np.ndarray) -> ScopePostings:
    """The ScopePostings of `rows` in `index` (a CorpusIndex), kept as long as the index lives."""
    cache = _POSTINGS.setdefault(index, {})
    found = cache.get(id(rows))
    if found is None or found.rows is not rows:  # the index caches one rows array per scope
        found = cache[id(rows)] = ScopePostings(index.bm25, rows)
    return found


class ScopedScores:
    """A scope's BM25 scores that index like the full score array: `scores[pos]` for any position
    (or an array of positions); positions outside the scope are scored on demand."""

    __slots__ = ("rows", "local", "_bm25", "_tokens", "_outside")

    def __init__(self, index, tokens: Sequence[str], rows: np.ndarray):
        self.rows = rows
        self._bm25, self._tokens = index.bm25, list(tokens)
        self.local = scope_postings(index, rows).scores(self._tokens)
        self._outside: dict[int, float] = {}

    def scores(self, positions) -> np.ndarray:
        """Exact scores (float64) of `positions`, as BM25Hits.scores() gives them."""
        return np.atleast_1d(self[np.asarray(positions, dtype=np.int64).reshape(-1)])

    def __getitem__(self, positions):
        if isinstance(positions, int | np.integer):  # the common case: one candidate's score
            pos = int(positions)
            i = int(self.rows.searchsorted(pos))
            if i < self.rows.size and self.rows[i] == pos:
                return self.local[i]
            value = self._outside.get(pos)
            if value is None:
                value = self._outside[pos] = float(bm25_at(self._bm25, self._tokens, [pos])[0])
            return value
        wanted = np.asarray(positions, dtype=np.int64)
        flat = wanted.reshape(-1)
        out = np.empty(flat.size)
        if self.rows.size:
            at = np.minimum(np.searchsorted(self.rows, flat), self.rows.size - 1)
            inside = self.rows[at] == flat
        else:
            at = np.zeros(flat.size, dtype=np.int64)
            inside = np.zeros(flat.size, dtype=bool)
        out[inside] = self.local[at[inside]]
        if not inside.all():
            out[~inside] = bm25_at(self._bm25, self._tokens, flat[~inside])
        return out[0] if wanted.ndim == 0 else out.reshape(wanted.shape)
