"""Search restricted to a scope, with the scope's own BM25 statistics: a project's lexical scores in
a store are the scores it would have alone.

BM25's idf and average length are statistics of a collection. A frame's scope (its project, or the
projects it names) is the collection a scoped selection searches, so ScopeBM25 scores the scope's
units with the scope's own statistics: its size, its average document length, and each term's idf
over the scope's documents (negatives floored at epsilon x the scope's average idf, summed in the
order the scope's documents first use each term, as BM25Okapi sums it). Everything a unit brings
(its term frequencies, its length) is read from the store's postings; nothing is re-indexed. A
project's scores in a store of a hundred projects are then bit-identical to the scores of an index
of that project's units alone (same float64 operations in the same order), so the lexical list, the
pool and the bundle are the project's own whatever else the store holds.

  - ScopeBM25 (one per index and scope, kept with the index): the statistics, and per term the
    scope's share of its postings (local row indices and their weights), found once per (scope,
    term) as queries ask for them (up to SCOPE_CACHE_POSTINGS entries a scope; past it a term's
    share is recomputed per query).
  - ScopedScores (one per query): the scope's rows' scores, and any other unit's on demand (a
    pulled out-of-scope successor is scored with the scope's statistics; a term the scope never
    uses adds nothing, as it would add nothing to an index of the scope alone).
  - dense: cosines do not depend on the collection. A scope of at most 1/SCOPE_ROWS_SHARE of the
    corpus and SCOPE_ROWS_MAX units is scored by its rows (the searcher's `cosines`), a larger one
    by the searcher's full scan, masked (retrieval.py).

Ties break by position as everywhere else (rows are ascending, so a local index orders like a
position, and like the position in an index of the scope alone).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from weakref import WeakKeyDictionary

import numpy as np

from .bm25 import BM25Index
from .tokens import tokenise

SCOPE_ROWS_SHARE = 4  # a scope of at most 1/4 of the corpus ...
SCOPE_ROWS_MAX = 4096  # ... and at most this many units is scored by its rows (dense), else masked
SCOPE_CACHE_POSTINGS = 1 << 20  # in-scope postings kept a scope (~16 MB); past it, per query


def searched_by_rows(rows: np.ndarray, size: int) -> bool:
    """Whether a scope of `rows` is searched by its own rows rather than a masked full scan (a
    large scope is cheaper to mask: a contiguous scan, or the IVF's probe over-fetched)."""
    return rows.size <= SCOPE_ROWS_MAX and rows.size * SCOPE_ROWS_SHARE <= size


def _scope_terms(index, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The store term ids of every (row, distinct term) pair of the scope, rows in order, and the
    pair's row index (local)."""
    starts = index.term_offsets[rows]
    lengths = index.term_offsets[rows + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    row_starts = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    flat = row_starts + np.arange(total)
    return index.terms[flat].astype(np.int64), np.repeat(np.arange(rows.size), lengths)


class ScopeBM25:
    """BM25Okapi over one scope's units with the scope's own statistics (see the module)."""

    def __init__(self, index, rows: np.ndarray, mask: np.ndarray):
        bm25: BM25Index = index.bm25
        self.rows, self.mask, self._bm25 = rows, mask, bm25
        n = self.size = int(rows.size)
        k1, b = bm25.k1, bm25.b
        lengths = bm25.doc_len[rows]
        self.avgdl = (int(lengths.sum()) / n) if n else 0.0
        # the length-normalisation term, over the scope's rows exactly as BM25Index computes it
        self.norm = k1 * (1 - b + b * lengths / self.avgdl) if n else np.zeros(0)
        terms, _ = _scope_terms(index, rows)
        df = np.bincount(terms, minlength=len(bm25.postings)) if terms.size else np.zeros(0, int)
        # idf as BM25Okapi._calc_idf over the scope: summed in the order the scope's documents
        # first use each term. Exact order: the scope's texts, tokenised again (a scope searched by
        # its rows, at most SCOPE_ROWS_MAX units, once per index); a larger scope sums in (first
        # unit, term id) order, which can move the floor of a term in over half the scope by a few
        # ulps and nothing else.
        if n <= SCOPE_ROWS_MAX:
            seen: dict[str, None] = {}
            for pos in rows.tolist():
                seen.update(dict.fromkeys(tokenise(index.units[pos].text)))
            vocab = bm25.vocab
            order = [vocab[word] for word in seen]
        elif terms.size:
            _, first = np.unique(terms, return_index=True)
            order = terms[np.sort(first)].tolist()
        else:
            order = []
        idf: dict[int, float] = {}
        idf_sum = 0.0
        negative = []
        for tid in order:
            freq = int(df[tid])
            value = math.log(n - freq + 0.5) - math.log(freq + 0.5)
            idf[tid] = value
            idf_sum += value
            if value < 0:
                negative.append(tid)
        self.average_idf = idf_sum / len(idf) if idf else 0.0
        eps = bm25.epsilon * self.average_idf
        for tid in negative:
            idf[tid] = eps
        self.idf = idf
        self._terms: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._cached = 0

    def term(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """The scope's rows holding term `tid` (local indices, ascending) and their weights."""
        found = self._terms.get(tid)
        if found is not None:
            return found
        bm25, rows = self._bm25, self.rows
        postings, tfs = bm25.postings[tid], bm25.tfs[tid]
        if postings.size > 8 * rows.size:  # a common term: look the scope's rows up in it
            at = np.minimum(np.searchsorted(postings, rows), postings.size - 1)
            docs = np.flatnonzero(postings[at] == rows)
            tf = tfs[at[docs]]
        else:  # a rarer one: keep its in-scope postings
            inside = self.mask[postings]
            docs = np.searchsorted(rows, postings[inside])
            tf = tfs[inside]
        k1p1 = bm25.k1 + 1
        # the very expression BM25Index precomputes its weights with, over the scope's statistics
        weights = (self.idf[tid] or 0) * (tf * k1p1 / (tf + self.norm[docs]))
        found = (docs, weights)
        if self._cached + docs.size <= SCOPE_CACHE_POSTINGS:
            self._terms[tid] = found
            self._cached += docs.size
        return found

    def tids(self, tokens: Sequence[str]) -> list[int]:
        """The query's term ids the scope uses, in query order, repeats kept (each adds again)."""
        vocab, idf = self._bm25.vocab, self.idf
        return [tid for tid in (vocab.get(w) for w in tokens) if tid is not None and tid in idf]

    def scores(self, tids: Sequence[int]) -> np.ndarray:
        """The scope's rows' scores: BM25Okapi.get_scores over an index of the scope alone."""
        score = np.zeros(self.size)
        for tid in tids:
            docs, weights = self.term(tid)
            score[docs] += weights
        return score

    def scores_at(self, tids: Sequence[int], positions: np.ndarray) -> np.ndarray:
        """Scores of any store positions with the scope's statistics (an out-of-scope unit brings
        its own term frequencies and length)."""
        bm25 = self._bm25
        k1, b, k1p1 = bm25.k1, bm25.b, bm25.k1 + 1
        score = np.zeros(positions.size)
        if positions.size == 0 or self.size == 0:
            return score
        norm = k1 * (1 - b + b * bm25.doc_len[positions] / self.avgdl)
        for tid in tids:
            postings = bm25.postings[tid]
            at = np.minimum(np.searchsorted(postings, positions), postings.size - 1)
            hit = postings[at] == positions
            if hit.any():
                tf = bm25.tfs[tid][at[hit]]
                score[hit] += (self.idf[tid] or 0) * (tf * k1p1 / (tf + norm[hit]))
        return score


_SCOPES: WeakKeyDictionary = WeakKeyDictionary()  # CorpusIndex -> {id(rows): ScopeBM25}


def scope_bm25(index, rows: np.ndarray, mask: np.ndarray) -> ScopeBM25:
    """The ScopeBM25 of `rows` in `index` (a CorpusIndex), kept as long as the index lives."""
    cache = _SCOPES.setdefault(index, {})
    found = cache.get(id(rows))
    if found is None or found.rows is not rows:  # the index caches one rows array per scope
        found = cache[id(rows)] = ScopeBM25(index, rows, mask)
    return found


class ScopedScores:
    """One query's BM25 scores over a scope, with the scope's statistics, that index like a full
    score array: `scores[pos]` for any position (or an array of positions); positions outside the
    scope are scored on demand."""

    __slots__ = ("rows", "local", "_scope", "_tids", "_outside")

    def __init__(self, index, tokens: Sequence[str], rows: np.ndarray, mask: np.ndarray):
        self.rows = rows
        self._scope = scope_bm25(index, rows, mask)
        self._tids = self._scope.tids(tokens)
        self.local = self._scope.scores(self._tids)
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
                at = np.asarray([pos], dtype=np.int64)
                value = self._outside[pos] = float(self._scope.scores_at(self._tids, at)[0])
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
            out[~inside] = self._scope.scores_at(self._tids, flat[~inside])
        return out[0] if wanted.ndim == 0 else out.reshape(wanted.shape)
