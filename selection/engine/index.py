"""CorpusIndex: built once per corpus; per-query work stays proportional to the pool, except the two
scans.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import numpy as np

from .types import Unit

TOKENISER = "lowercase-unicode-words-v1"
FULL_ROW_MIN_UNITS = 20_000  # below this a scatter is as cheap as a full-length add
FULL_ROW_MAX_TERMS = 32  # full-length rows kept for at most this many of the commonest terms
TOP_K_BLOCKED = 65_536  # from this length top_k narrows the field with block maxima first
_WORD = re.compile(r"\w+")


def tokenise(text: str) -> list[str]:
    """Lowercase, then every run of Unicode word characters (letters, digits, underscore).

    No stop words, no stemming, no minimum length; the BM25 reference test feeds these exact tokens
    to rank_bm25.BM25Okapi.
    """
    return _WORD.findall(text.lower())


def top_k(scores: np.ndarray, k: int, *, positive_only: bool = False) -> np.ndarray:
    """Positions of the k best scores, ordered by (score desc, position asc).

    Positions follow unit id order, so ties break by unit id. Ties at the cut are resolved the same
    way, so the answer never depends on argpartition's internal order.
    """
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.empty(0, dtype=np.int64)
    if n >= TOP_K_BLOCKED and k * 64 <= n:
        # k blocks each hold a maximum >= the smallest of them, so at least k scores reach it and
        # the k-th best is >= it: everything below can be dropped before the exact selection
        width = n // k
        floor = scores[: width * k].reshape(k, width).max(axis=1).min()
        if positive_only:
            floor = max(floor, np.nextafter(0, 1, dtype=scores.dtype))
        field = np.flatnonzero(scores >= floor)
        if field.size < n // 2:
            return field[top_k(scores[field], k)]
    if positive_only:
        eligible = np.flatnonzero(scores > 0)
        if eligible.size == 0:
            return eligible
        sub = scores[eligible]
    else:
        eligible = None
        sub = scores
    m = sub.shape[0]
    if m > k:
        part = np.argpartition(-sub, k - 1)[:k]
        cut = sub[part].min()
        # every position tied with the cut competes on position, not on partition luck
        chosen = np.flatnonzero(sub >= cut)
    else:
        chosen = np.arange(m)
    order = np.lexsort((chosen, -sub[chosen]))[:k]
    chosen = chosen[order]
    return chosen if eligible is None else eligible[chosen]


class BM25Index:
    """Inverted-index BM25 with rank_bm25.BM25Okapi's exact arithmetic (same float64 operations,
    same
    order), so scores are bit-identical while a query only touches its terms' postings."""

    def __init__(
        self, docs: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.size = len(docs)
        vocab: dict[str, int] = {}
        df: list[int] = []
        post_docs: list[list[int]] = []
        post_tf: list[list[int]] = []
        lengths = np.empty(self.size, dtype=np.int64)
        for pos, doc in enumerate(docs):
            lengths[pos] = len(doc)
            counts: dict[str, int] = {}
            for word in doc:
                counts[word] = counts.get(word, 0) + 1
            for word, tf in counts.items():  # first-occurrence order, as rank_bm25 builds `nd`
                tid = vocab.get(word)
                if tid is None:
                    tid = vocab[word] = len(df)
                    df.append(0)
                    post_docs.append([])
                    post_tf.append([])
                df[tid] += 1
                post_docs[tid].append(pos)
                post_tf[tid].append(tf)
        self.vocab = vocab
        self.doc_len = lengths
        self.avgdl = (int(lengths.sum()) / self.size) if self.size else 0.0
        self.postings = [np.asarray(d, dtype=np.int64) for d in post_docs]
        self.tfs = [np.asarray(t, dtype=np.int64) for t in post_tf]
        # idf exactly as BM25Okapi._calc_idf: summed in first-appearance order, negatives floored at
        # eps
        idf = [0.0] * len(df)
        idf_sum = 0.0
        negative: list[int] = []
        for tid, freq in enumerate(df):
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
        # each posting's contribution, precomputed with the very expression scores() used to
        # evaluate per query (same float64 operations, so the same bits); a query then only adds
        k1p1 = k1 + 1
        self.weights = [
            (idf[tid] or 0) * (tf * k1p1 / (tf + self.norm[docs]))
            for tid, (docs, tf) in enumerate(zip(self.postings, self.tfs, strict=True))
        ]
        # terms in more than half the units also keep a full-length row: adding it whole is a
        # contiguous pass instead of a scatter, and adding 0.0 where the term is absent changes no
        # score (x + 0.0 == x)
        self.full_rows: dict[int, np.ndarray] = {}
        if self.size >= FULL_ROW_MIN_UNITS:
            common = sorted(
                (tid for tid, freq in enumerate(df) if freq * 2 > self.size),
                key=lambda tid: (-df[tid], tid),
            )[:FULL_ROW_MAX_TERMS]
            for tid in common:
                row = np.zeros(self.size)
                row[self.postings[tid]] = self.weights[tid]
                self.full_rows[tid] = row

    def describe(self) -> str:
        return f"bm25okapi(k1={self.k1},b={self.b},epsilon={self.epsilon})"

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """BM25Okapi.get_scores(tokens): repeated query tokens count again, unknown ones add
        nothing.
        """
        score = np.zeros(self.size)
        for word in tokens:
            tid = self.vocab.get(word)
            if tid is None:
                continue
            row = self.full_rows.get(tid)
            if row is not None:
                score += row
            else:
                score[self.postings[tid]] += self.weights[tid]
        return score


IVF_THRESHOLD = 50_000  # CorpusIndex.build picks IvfSearcher from this many vectors up


class DenseHits:
    """One dense query's top positions (cosine desc, position asc) and any unit's cosine on demand.

    An exact searcher hands over every cosine (`full`); an approximate one hands over the cosines
    it computed (`known`) and a function that scores any other positions exactly.
    """

    __slots__ = ("top", "_full", "_known", "_exact")

    def __init__(
        self,
        top: np.ndarray,
        *,
        full: np.ndarray | None = None,
        known: dict[int, float] | None = None,
        exact: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        if full is None and exact is None:
            raise ValueError("DenseHits needs every cosine or a way to compute one")
        self.top = top
        self._full = full
        self._known = known if known is not None else {}
        self._exact = exact

    def prefetch(self, positions: Sequence[int]) -> None:
        """Compute the cosines `score` will be asked for in one product instead of one by one."""
        if self._full is not None:
            return
        missing = [p for p in positions if p not in self._known]
        if missing:
            values = self._exact(np.asarray(missing, dtype=np.int64))
            self._known.update(zip(missing, values.tolist(), strict=True))

    def score(self, pos: int) -> float:
        if self._full is not None:
            return float(self._full[pos])
        value = self._known.get(pos)
        if value is None:
            value = float(self._exact(np.asarray([pos], dtype=np.int64))[0])
            self._known[pos] = value
        return value


class DenseSearcher(Protocol):
    """Nearest-neighbour search over unit positions (NumpyExactSearcher, IvfSearcher).

    `name` is recorded in every trace's retriever config, so it names the searcher's parameters.
    """

    name: str
    dimension: int
    size: int

    def scores(self, vector: np.ndarray) -> np.ndarray:
        """Cosine similarity of `vector` to every unit, indexed by position (float32 or float64)."""
        ...

    def top(self, vector: np.ndarray, k: int) -> np.ndarray:
        """Positions of the k most similar units, ordered by (similarity desc, position)."""
        ...

    def search(self, vector: np.ndarray, k: int) -> DenseHits:
        """top() with the cosines; a searcher without it is scanned through scores()."""
        ...


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError("vectors must be an (N, d) array")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


class NumpyExactSearcher:
    """Exact cosine: one float32 matrix-vector product over row-normalised vectors."""

    name = "numpy-exact-cosine"

    def __init__(self, vectors: np.ndarray):
        self.matrix = normalise_rows(vectors)
        self.dimension = int(self.matrix.shape[1])
        self.size = int(self.matrix.shape[0])

    def scores(self, vector: np.ndarray) -> np.ndarray:
        query = normalise_vector(vector, self.dimension)
        return self.matrix @ query

    def top(self, vector: np.ndarray, k: int) -> np.ndarray:
        return top_k(self.scores(vector), k)

    def search(self, vector: np.ndarray, k: int) -> DenseHits:
        full = self.scores(vector)
        return DenseHits(top_k(full, k), full=full)


def dense_searcher(vectors: np.ndarray, *, threshold: int | None = IVF_THRESHOLD) -> DenseSearcher:
    """Exact below `threshold` vectors, IvfSearcher from there on (None: always exact)."""
    if threshold is not None and vectors.shape[0] >= threshold:
        from .ivf import IvfSearcher

        return IvfSearcher(vectors)
    return NumpyExactSearcher(vectors)


def normalise_vector(vector: Sequence[float] | np.ndarray, dimension: int) -> np.ndarray:
    query = np.asarray(vector, dtype=np.float32).reshape(-1)
    if query.shape[0] != dimension:
        raise ValueError(f"query vector has dimension {query.shape[0]}, index has {dimension}")
    norm = float(np.linalg.norm(query))
    return query / norm if norm else query


@dataclass(frozen=True)
class _Links:
    superseded_by: dict[str, tuple[str, ...]]
    echoed_by: dict[str, tuple[str, ...]]
    refuted_by: dict[str, tuple[str, ...]]
    supported_by: dict[str, tuple[str, ...]]


def _invert(pairs: list[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for target, source in pairs:
        out.setdefault(target, []).append(source)
    return {k: tuple(sorted(set(v))) for k, v in out.items()}


class CorpusIndex:
    """Units in id order, BM25 postings, the vector matrix, per-(project, class) lists and link
    maps.

    Build once with CorpusIndex.build(units, vectors). Input order never matters: units are sorted
    by id, and vectors are permuted with them.
    """

    def __init__(
        self,
        units: Sequence[Unit],
        *,
        dense: DenseSearcher | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
    ):
        ids = [u.id for u in units]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate unit ids")
        if list(ids) != sorted(ids):
            raise ValueError("CorpusIndex needs units sorted by id; use CorpusIndex.build")
        self.units: tuple[Unit, ...] = tuple(units)
        self.position: dict[str, int] = {u.id: i for i, u in enumerate(self.units)}
        tokens = [tokenise(u.text) for u in self.units]
        self.bm25 = BM25Index(tokens, k1=k1, b=b, epsilon=epsilon)
        # distinct term ids per unit (CSR), for overlap and redundancy without per-unit sets
        term_lists = [
            np.unique(
                np.fromiter((self.bm25.vocab[t] for t in doc), dtype=np.int64, count=len(doc))
            )
            for doc in tokens
        ]
        self.term_offsets = np.zeros(len(term_lists) + 1, dtype=np.int64)
        if term_lists:
            self.term_offsets[1:] = np.cumsum([t.size for t in term_lists])
            self.terms = (
                np.concatenate(term_lists) if self.term_offsets[-1] else np.zeros(0, dtype=np.int64)
            )
        else:
            self.terms = np.zeros(0, dtype=np.int64)
        self.dense = dense
        if dense is not None and getattr(dense, "size", len(self.units)) != len(self.units):
            raise ValueError("dense searcher does not cover the corpus")
        by_pc: dict[tuple[str, str], list[int]] = {}
        for pos, u in enumerate(self.units):
            by_pc.setdefault((u.project, u.evidence_class), []).append(pos)
        self.by_project_class: dict[tuple[str, str], tuple[int, ...]] = {
            k: tuple(v) for k, v in by_pc.items()
        }
        self.links = _Links(
            superseded_by=_invert([(old, u.id) for u in self.units for old in u.supersedes]),
            echoed_by=_invert([(u.echo_of, u.id) for u in self.units if u.echo_of]),
            refuted_by=_invert([(t, u.id) for u in self.units for t in u.refutes]),
            supported_by=_invert([(t, u.id) for u in self.units for t in u.supports]),
        )
        self.neighbour_ids: dict[str, tuple[str, ...]] = {}
        for u in self.units:
            linked = self.neighbours(u.id)
            if linked:
                self.neighbour_ids[u.id] = linked
        dated = [(u.created_at, u.id) for u in self.units if u.created_at is not None]
        self.newest: datetime | None = max((d for d, _ in dated), default=None)
        # most recent first, ties by id; undated units never count as recent
        self.recency_order: tuple[int, ...] = tuple(
            self.position[uid] for _, uid in sorted(dated, key=lambda p: (-p[0].timestamp(), p[1]))
        )
        digest = hashlib.sha256()
        for u in self.units:
            digest.update(f"{u.id}\x00{u.project}\x00{u.evidence_class}\x00{u.text}\x01".encode())
        self.digest = digest.hexdigest()[:16]

    @classmethod
    def build(
        cls,
        units: Sequence[Unit],
        vectors: np.ndarray | None = None,
        *,
        dense: DenseSearcher | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        dense_threshold: int | None = IVF_THRESHOLD,
    ) -> CorpusIndex:
        """Index `units`; `vectors` is an optional (N, d) array aligned with `units` as given.

        From `dense_threshold` vectors on, dense search is approximate (IvfSearcher); None keeps
        it exact at any size. The trace's retriever config names the searcher either way.
        """
        order = sorted(range(len(units)), key=lambda i: units[i].id)
        ordered = [units[i] for i in order]
        if vectors is not None:
            if dense is not None:
                raise ValueError("pass vectors or a dense searcher, not both")
            array = np.asarray(vectors)
            if array.ndim != 2 or array.shape[0] != len(units):
                raise ValueError(f"vectors must be ({len(units)}, d), got {array.shape}")
            dense = dense_searcher(
                array[np.asarray(order, dtype=np.int64)] if order else array,
                threshold=dense_threshold,
            )
        return cls(ordered, dense=dense, k1=k1, b=b, epsilon=epsilon)

    def __len__(self) -> int:
        return len(self.units)

    def unit(self, unit_id: str) -> Unit | None:
        pos = self.position.get(unit_id)
        return None if pos is None else self.units[pos]

    def unit_terms(self, pos: int) -> np.ndarray:
        return self.terms[self.term_offsets[pos] : self.term_offsets[pos + 1]]

    def term_ids(self, tokens: Sequence[str]) -> np.ndarray:
        found = [self.bm25.vocab[t] for t in tokens if t in self.bm25.vocab]
        return np.unique(np.asarray(found, dtype=np.int64))

    def successors(self, unit_id: str) -> tuple[str, ...]:
        return self.links.superseded_by.get(unit_id, ())

    def neighbours(self, unit_id: str) -> tuple[str, ...]:
        """Every unit linked to this one by supersession, restatement, support or refutation."""
        u = self.unit(unit_id)
        if u is None:
            return ()
        linked = set(u.supersedes) | set(u.supports) | set(u.refutes)
        if u.echo_of:
            linked.add(u.echo_of)
        for table in (
            self.links.superseded_by,
            self.links.echoed_by,
            self.links.refuted_by,
            self.links.supported_by,
        ):
            linked.update(table.get(unit_id, ()))
        linked.discard(unit_id)
        return tuple(sorted(linked))
