"""Search restricted to a scope's rows: BM25 and exact cosine over the in-scope positions only.

A scope that holds a small share of the corpus (one project of a hundred) is searched by its own
rows, so a query costs what the scope costs, not what the store costs:

  - BM25: each query term's postings are sorted by position, so a row's term frequency is one
    binary search (`np.searchsorted`) into the term's postings; the score of a row is the sum of the
    same precomputed posting weights, added in the same token order, as BM25Index.scores() adds them,
    so it is bit-identical to the full scan's score at that row.
  - dense: the searcher's `cosines(query, positions)` over the rows (exact, whatever the searcher).

Ties break by position as everywhere else (rows are ascending, so a local index orders like a
position). Any other unit's score is computed on demand (a pulled out-of-scope successor still
records its true BM25 score and cosine).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .bm25 import BM25Index

SCOPE_ROWS_SHARE = 4  # a scope of at most 1/4 of the corpus is searched by its rows, else masked


def searched_by_rows(rows: np.ndarray, size: int) -> bool:
    """Whether a scope of `rows` is searched by its own rows rather than a masked full scan."""
    return rows.size * SCOPE_ROWS_SHARE <= size


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


class ScopedScores:
    """A scope's BM25 scores that index like the full score array: `scores[pos]` for any position
    (or an array of positions); positions outside the scope are scored on demand."""

    __slots__ = ("rows", "local", "_bm25", "_tokens")

    def __init__(self, bm25: BM25Index, tokens: Sequence[str], rows: np.ndarray):
        self.rows = rows
        self._bm25, self._tokens = bm25, list(tokens)
        self.local = bm25_at(bm25, self._tokens, rows)

    def __getitem__(self, positions):
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
