"""BM25Index: inverted-index BM25 whose scores are bit-identical to rank_bm25.BM25Okapi's, and its
top-k search with MaxScore pruning (BM25Hits)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from .topk import top_k

FULL_ROW_MIN_UNITS = 20_000  # below this a scatter is as cheap as a full-length add
FULL_ROW_MAX_TERMS = 32  # full-length rows kept for at most this many of the commonest terms
PRUNE_MIN_UNITS = 250_000  # below this a query scores every unit (measured cheaper than pruning)
SEED_POSTINGS = 4  # the threshold's seed reads the best terms' postings up to this many x k ...
SEED_SHARE = 256  # ... or up to 1/SEED_SHARE of the corpus, whichever is more
EXHAUSTIVE_SHARE = 4  # candidates beyond 1/EXHAUSTIVE_SHARE of the corpus: score every unit instead
BOUND_SLACK = 1e-9  # relative margin on a sum of upper bounds (float rounding of <100 additions)
BUILD_CHUNK = 1 << 22  # postings weighted at a time while building (bounds the temporaries)
ENCODE_CHUNK = 1 << 16  # documents whose term ids are gathered in Python lists at a time


class Ragged(Sequence):
    """A list of 1-d arrays held as one array cut by offsets: `ragged[i]` is a view of row i.

    A million-unit index has hundreds of thousands of terms; three lists of that many arrays cost
    seconds to unpickle, one array and its offsets nothing (and map from the index cache's file).
    """

    __slots__ = ("data", "offsets")

    def __init__(self, data: np.ndarray, offsets: np.ndarray):
        self.data, self.offsets = data, offsets

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        offsets = self.offsets
        if i < 0:
            i += offsets.size - 1
        return self.data[offsets[i] : offsets[i + 1]]

    def __len__(self) -> int:
        return self.offsets.size - 1

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self[i]

    def __getstate__(self):
        return (self.data, self.offsets)

    def __setstate__(self, state):
        self.data, self.offsets = state


class EncodedDocs:
    """Documents as term ids: `vocab` (term -> id, in first-occurrence order over the documents and
    their words, as rank_bm25 meets them), each document's length, and the (document, term, term
    frequency) pairs. Reads `docs` once, so a generator of token lists never holds them all."""

    def __init__(self, docs: Iterable[Sequence[str]]):
        vocab: dict[str, int] = {}
        lengths: list[int] = []
        chunks: list[np.ndarray] = []
        pending: list[int] = []
        for doc in docs:
            ids = [vocab.setdefault(word, len(vocab)) for word in doc]
            lengths.append(len(ids))
            pending.extend(ids)
            if len(pending) >= ENCODE_CHUNK * 16:
                chunks.append(np.asarray(pending, dtype=np.int32))
                pending = []
        chunks.append(np.asarray(pending, dtype=np.int32))
        self.vocab = vocab
        self.size = len(lengths)
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.tokens = np.concatenate(chunks)  # every document's term ids, end to end
        self._pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(document, term id, frequency) of each distinct term of each document, ordered by
        document then term id."""
        if self._pairs is None:
            ends = np.zeros(self.size + 1, dtype=np.int64)
            np.cumsum(self.lengths, out=ends[1:])
            parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            for first in range(0, self.size, ENCODE_CHUNK):  # documents at a time: small sorts
                last = min(self.size, first + ENCODE_CHUNK)
                doc = np.repeat(np.arange(first, last, dtype=np.int64), self.lengths[first:last])
                key = (doc << 32) | self.tokens[ends[first] : ends[last]].astype(np.int64)
                key, tf = np.unique(key, return_counts=True)
                parts.append(((key >> 32).astype(np.int32), (key & 0xFFFFFFFF).astype(np.int32),
                              tf.astype(np.int32)))
            if not parts:
                empty = np.zeros(0, dtype=np.int32)
                parts.append((empty, empty, empty))
            self._pairs = tuple(np.concatenate(column) for column in zip(*parts, strict=True))
        return self._pairs

    def distinct_terms(self) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, term ids): each document's distinct term ids ascending, end to end (CSR)."""
        doc, tid, _ = self.pairs()
        offsets = np.zeros(self.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(doc, minlength=self.size), out=offsets[1:])
        return offsets, tid


class BM25Index:
    """Inverted-index BM25 with rank_bm25.BM25Okapi's exact arithmetic (same float64 operations,
    same
    order), so scores are bit-identical while a query only touches its terms' postings."""

    def __init__(
        self,
        docs: Iterable[Sequence[str]],
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        *,
        encoded: EncodedDocs | None = None,
    ):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        if encoded is None:
            encoded = EncodedDocs(docs)
        self.size = encoded.size
        # term ids in first-occurrence order over the documents, as rank_bm25 builds `nd`
        self.vocab = encoded.vocab
        lengths = encoded.lengths
        pair_doc, pair_tid, pair_tf = encoded.pairs()
        # postings: each term's documents ascending, in one array per column cut by `offsets`
        order = np.argsort(pair_tid, kind="stable")  # stable: documents stay ascending
        df = np.bincount(pair_tid, minlength=len(self.vocab)).astype(np.int64)
        offsets = np.zeros(len(df) + 1, dtype=np.int64)
        np.cumsum(df, out=offsets[1:])
        post_docs = pair_doc[order].astype(np.int64)
        post_tf = pair_tf[order].astype(np.int32)  # half int64's memory
        post_tid = pair_tid[order]
        del order
        self.doc_len = lengths
        self.avgdl = (int(lengths.sum()) / self.size) if self.size else 0.0
        self.postings = Ragged(post_docs, offsets)
        self.tfs = Ragged(post_tf, offsets)
        # idf exactly as BM25Okapi._calc_idf: summed in first-appearance order, negatives floored at
        # eps
        idf = [0.0] * len(df)
        idf_sum = 0.0
        negative: list[int] = []
        for tid, freq in enumerate(df.tolist()):
            value = math.log(self.size - freq + 0.5) - math.log(freq + 0.5)
            idf[tid] = value
            idf_sum += value
            if value < 0:
                negative.append(tid)
        self.average_idf = idf_sum / len(idf) if idf else 0.0
        eps = epsilon * self.average_idf
        for tid in negative:
            idf[tid] = eps
        self.idf = idf
        if self.size:
            # the length-normalisation term, computed over the whole array exactly as rank_bm25 does
            self.norm = k1 * (1 - b + b * lengths / self.avgdl)
        else:
            self.norm = np.zeros(0)
        # each posting's contribution, precomputed with the expression a per-query evaluation
        # would use (same float64 operations, element by element, so the same bits); a
        # query then only adds
        k1p1 = k1 + 1
        weights = np.empty(post_docs.size, dtype=np.float64)
        idf_array = np.asarray([value or 0 for value in idf], dtype=np.float64)
        for start in range(0, post_docs.size, BUILD_CHUNK):
            cut = slice(start, start + BUILD_CHUNK)
            tf = post_tf[cut]
            weights[cut] = idf_array[post_tid[cut]] * (tf * k1p1 / (tf + self.norm[post_docs[cut]]))
        del post_tid
        self.weights = Ragged(weights, offsets)
        # terms in more than half the units also keep a full-length row: adding it whole is a
        # contiguous pass instead of a scatter, and adding 0.0 where the term is absent changes no
        # score (x + 0.0 == x)
        self.full_rows: dict[int, np.ndarray] = {}
        if self.size >= FULL_ROW_MIN_UNITS:
            common = sorted(
                (tid for tid, freq in enumerate(df.tolist()) if freq * 2 > self.size),
                key=lambda tid: (-df[tid], tid),
            )[:FULL_ROW_MAX_TERMS]
            for tid in common:
                row = np.zeros(self.size)
                row[self.postings[tid]] = self.weights[tid]
                self.full_rows[tid] = row
        # each term's largest contribution to any unit: MaxScore's upper bounds (search())
        self.term_max = np.zeros(len(df), dtype=np.float64)
        filled = np.flatnonzero(df)
        if filled.size:
            self.term_max[filled] = np.maximum.reduceat(weights, offsets[filled])

    def describe(self) -> str:
        return f"bm25okapi(k1={self.k1},b={self.b},epsilon={self.epsilon})"

    def term_sequence(self, tokens: Sequence[str]) -> tuple[int, ...]:
        """The query's known term ids in query order, repeats kept (each adds again)."""
        vocab = self.vocab
        return tuple(vocab[w] for w in tokens if w in vocab)

    def search(
        self,
        tokens: Sequence[str],
        k: int,
        *,
        allowed: np.ndarray | None = None,
        prune: bool | None = None,
    ) -> BM25Hits:
        """The k best units with a positive score, ordered by (score desc, position asc): exactly
        `top_k(scores(tokens), k, positive_only=True)`, with `allowed` (a boolean mask over
        positions) ranking only allowed units.

        MaxScore: every term's contribution is bounded by `term_max`; the exact scores of a seed
        (the units of the query's highest-bound terms) give a threshold no lower than the true k-th
        best score; the terms whose bounds sum below it cannot lift a unit that has none of the
        other terms into the top k, so only the units holding one of the other (rarer) terms are
        scored, each with the very additions `scores()` makes, in the same order. Common terms
        stop touching most units. `prune` None prunes from PRUNE_MIN_UNITS units up.
        """
        tids = self.term_sequence(tokens)
        if prune is None:
            prune = self.size >= PRUNE_MIN_UNITS
        hits = BM25Hits(self, tids)
        if k <= 0 or not tids or self.size == 0:
            hits.top = np.empty(0, dtype=np.int64)
            return hits
        candidates = self._candidates(tids, k, allowed, hits) if prune else None
        if candidates is None:
            full = self._full(tids)
            hits.full = full
            hits.scored = self.size
            ranked = full if allowed is None else np.where(allowed, full, 0.0)
            hits.top = top_k(ranked, k, positive_only=True)
            return hits
        values = self._gather(tids, candidates)
        hits.scored += candidates.size
        if allowed is not None:
            values = np.where(allowed[candidates], values, 0.0)
        hits.top = candidates[top_k(values, k, positive_only=True)]
        return hits

    def _candidates(
        self, tids: tuple[int, ...], k: int, allowed: np.ndarray | None, hits: BM25Hits
    ) -> np.ndarray | None:
        """Sorted positions that hold every unit of the top k (see search()), or None when scoring
        every unit is as cheap (or a term can subtract, which the bounds do not cover)."""
        count: dict[int, int] = {}
        for tid in tids:
            count[tid] = count.get(tid, 0) + 1
        bound = {tid: self.term_max[tid] * m for tid, m in count.items()}
        if any(self.term_max[tid] < 0 for tid in count):
            return None
        # seed: the units of the highest-bound terms, scored exactly; the k-th best of them (if it
        # is positive) is a score the true k-th best reaches
        by_bound = sorted(count, key=lambda t: (-bound[t], t))
        budget = max(SEED_POSTINGS * k, self.size // SEED_SHARE)
        seed_lists, read = [], 0
        for tid in by_bound:
            postings = self.postings[tid]
            if read + postings.size > budget and (seed_lists or postings.size * EXHAUSTIVE_SHARE > self.size):
                break
            seed_lists.append(postings)
            read += postings.size
        if not seed_lists:
            return None
        seed = self._union(seed_lists)
        if allowed is not None:
            seed = seed[allowed[seed]]
        threshold = 0.0
        if seed.size >= k:
            values = self._gather(tids, seed)
            hits.scored += seed.size
            threshold = float(np.partition(values, seed.size - k)[seed.size - k])
        if threshold <= 0.0:
            return None
        # non-essential terms: the lowest bounds, as long as their sum stays below the threshold
        essential = []
        total = spare = 0.0
        for tid in sorted(count, key=lambda t: (bound[t], t)):
            total += bound[tid]
            if total * (1.0 + BOUND_SLACK) >= threshold:
                essential.append(tid)
            else:
                spare = total
        size = sum(self.postings[tid].size for tid in essential)
        if size > self.size // EXHAUSTIVE_SHARE:
            return None
        candidates = self._union([self.postings[tid] for tid in essential])
        if allowed is not None:
            candidates = candidates[allowed[candidates]]
        # a candidate's bound: its essential terms' own contributions plus the spare terms' bounds;
        # below the threshold it cannot reach the top k, and is never scored exactly
        ceiling = np.full(candidates.size, spare)
        for tid in essential:
            postings = self.postings[tid]
            where = np.searchsorted(candidates, postings)
            np.minimum(where, max(candidates.size - 1, 0), out=where)
            found = candidates[where] == postings if candidates.size else where < 0
            ceiling[where[found]] += self.weights[tid][found] * count[tid]
        return candidates[ceiling * (1.0 + BOUND_SLACK) >= threshold]

    def _union(self, lists: list[np.ndarray]) -> np.ndarray:
        """The sorted distinct positions of sorted position lists."""
        if not lists:
            return np.empty(0, dtype=np.int64)
        if len(lists) == 1:
            return lists[0]
        total = sum(p.size for p in lists)
        if total * 16 > self.size:
            mark = np.zeros(self.size, dtype=bool)
            for p in lists:
                mark[p] = True
            return np.flatnonzero(mark)
        merged = np.sort(np.concatenate(lists))
        keep = np.empty(merged.size, dtype=bool)
        keep[0] = True
        np.not_equal(merged[1:], merged[:-1], out=keep[1:])
        return merged[keep]

    def _full(self, tids: Sequence[int]) -> np.ndarray:
        score = np.zeros(self.size)
        for tid in tids:
            row = self.full_rows.get(tid)
            if row is not None:
                score += row
            else:
                score[self.postings[tid]] += self.weights[tid]
        return score

    def _gather(self, tids: Sequence[int], positions: np.ndarray) -> np.ndarray:
        """scores(tokens)[positions] without scoring other units: each term's contribution is
        looked up in its postings and added in query order, as scores() adds it (a unit without the
        term adds nothing there, 0.0 here: the same value)."""
        score = np.zeros(positions.size)
        if positions.size == 0:
            return score
        for tid in tids:
            row = self.full_rows.get(tid)
            if row is not None:
                score += row[positions]
                continue
            postings = self.postings[tid]
            where = np.searchsorted(postings, positions)
            np.minimum(where, postings.size - 1, out=where)
            found = postings[where] == positions
            score += np.where(found, self.weights[tid][where], 0.0)
        return score

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """BM25Okapi.get_scores(tokens): repeated query tokens count again, unknown ones add
        nothing.
        """
        return self._full(self.term_sequence(tokens))


class BM25Hits:
    """One query's lexical hits: `top` (search()'s answer) and any unit's exact score on demand.

    `full` holds every unit's score when the search computed them all, else None; `scores()` then
    computes the asked positions alone. Indexing (`hits[pos]`, `hits[positions]`) and numpy
    conversion read the same scores, so code written for a full score array keeps working.
    """

    __slots__ = ("index", "tids", "top", "full", "scored")

    def __init__(self, index: BM25Index, tids: tuple[int, ...]):
        self.index = index
        self.tids = tids
        self.top: np.ndarray = np.empty(0, dtype=np.int64)
        self.full: np.ndarray | None = None
        self.scored = 0  # units whose score the search computed (the seed's included)

    def scores(self, positions) -> np.ndarray:
        """Exact scores (float64) of `positions`, bit-identical to BM25Index.scores()."""
        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        if self.full is not None:
            return self.full[positions]
        return self.index._gather(self.tids, positions)

    def __getitem__(self, pos):
        if isinstance(pos, (int, np.integer)):
            return self.scores([pos])[0]
        return self.scores(pos) if self.full is None else self.full[pos]

    def __len__(self) -> int:
        return self.index.size

    def __array__(self, dtype=None, copy=None):
        if self.full is None:
            self.full = self.index._full(self.tids)
        return self.full if dtype is None else self.full.astype(dtype)
