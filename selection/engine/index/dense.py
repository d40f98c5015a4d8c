"""Dense search: the searcher protocol, its hits, and the exact numpy searcher; no approximation here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from .topk import top_k


class DenseHits:
    """One dense query's top positions (cosine desc, position asc) and any unit's cosine on demand.

    An exact searcher hands over every cosine (`full`); an approximate one hands over the cosines
    it computed (`known`) and a function that scores any other positions exactly.
    """

    __slots__ = ("top", "_full", "_known", "_exact", "_bounds")

    def __init__(
        self,
        top: np.ndarray,
        *,
        full: np.ndarray | None = None,
        known: dict[int, float] | None = None,
        exact: Callable[[np.ndarray], np.ndarray] | None = None,
        bounds: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
    ):
        if full is None and exact is None:
            raise ValueError("DenseHits needs every cosine or a way to compute one")
        self.top = top
        self._full = full
        self._known = known if known is not None else {}
        self._exact = exact
        self._bounds = bounds

    @property
    def full(self) -> np.ndarray | None:
        """Every cosine, when the searcher computed them all (exact search), else None."""
        return self._full

    def with_top(self, top: np.ndarray) -> DenseHits:
        """The same cosines with another top list (a scoped search's)."""
        return DenseHits(top, full=self._full, known=self._known, exact=self._exact, bounds=self._bounds)

    def bounds(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(low, high) float64 arrays with low ≤ score(p) ≤ high for each position, from a compact
        copy of the vectors (an approximate searcher's int8 codes), without computing the exact
        cosines; None where the searcher offers no such bound (an exact one has every cosine)."""
        if self._bounds is None:
            return None
        return self._bounds(np.asarray(positions, dtype=np.int64))

    def prefetch(self, positions: Sequence[int]) -> None:
        """Compute the cosines `score` will be asked for in one product instead of one by one."""
        if self._full is not None:
            return
        missing = [p for p in positions if p not in self._known]
        if missing:
            values = self._exact(np.asarray(missing, dtype=np.int64))
            self._known.update(zip(missing, values.tolist(), strict=True))

    def scores_of(self, positions: Sequence[int] | np.ndarray) -> list[float]:
        """`score(p)` of each position: what `prefetch` then `score` give, without a call per
        position (a class pull at 100k asks for a thousand)."""
        if self._full is not None:
            return self._full[np.asarray(positions, dtype=np.int64)].tolist()
        if isinstance(positions, np.ndarray):
            positions = positions.tolist()
        known = self._known
        missing = [p for p in positions if p not in known]
        if missing:
            values = self._exact(np.asarray(missing, dtype=np.int64))
            known.update(zip(missing, values.tolist(), strict=True))
        return list(map(known.__getitem__, positions))

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

    def cosines(self, query: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Exact cosine of a normalised query to the given positions only (a scope's rows); a
        searcher without it is searched in scope by masking or over-fetching."""
        ...


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError("vectors must be an (N, d) array")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


SCAN_ROWS = 512  # rows of the matrix scanned at a time (768 KB of float32 at d=384)


class NumpyExactSearcher:
    """Exact cosine: float32 matrix-vector products over row-normalised vectors.

    The matrix is scanned SCAN_ROWS rows at a time, every query against a block before the next
    block is read, so a query and its objective read the matrix from memory once (`search_many`);
    each block is the same matrix-vector product a single query's scan makes, so a unit's cosine
    has the same bits whichever way it was asked, and the same as one whole-matrix product
    (BLAS computes each row's dot product alone; tests/selection/engine pins both)."""

    name = "numpy-exact-cosine"

    def __init__(self, vectors: np.ndarray, *, normalised: bool = False):
        # `normalised`: rows that are normalise_rows's output already (an assembled index's)
        self.matrix = np.ascontiguousarray(vectors, dtype=np.float32) if normalised else normalise_rows(vectors)
        self.dimension = int(self.matrix.shape[1])
        self.size = int(self.matrix.shape[0])

    def scores(self, vector: np.ndarray) -> np.ndarray:
        return self.scores_many([vector])[0]

    def scores_many(self, vectors: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Every unit's cosine to each vector, the matrix read once for all of them."""
        queries = [normalise_vector(v, self.dimension) for v in vectors]
        outs = [np.empty(self.size, dtype=np.float32) for _ in queries]
        matrix = self.matrix
        for start in range(0, self.size, SCAN_ROWS):
            block = matrix[start : start + SCAN_ROWS]
            for query, out in zip(queries, outs, strict=True):
                np.matmul(block, query, out=out[start : start + SCAN_ROWS])
        return outs

    def top(self, vector: np.ndarray, k: int) -> np.ndarray:
        return top_k(self.scores(vector), k)

    def search(self, vector: np.ndarray, k: int) -> DenseHits:
        return self.search_many([vector], k)[0]

    def search_many(self, vectors: Sequence[np.ndarray], k: int) -> list[DenseHits]:
        """search() for each vector, from one read of the matrix."""
        return [DenseHits(top_k(full, k), full=full) for full in self.scores_many(vectors)]

    def cosines(self, query: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return self.matrix[positions] @ query

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The normalised vectors of `positions` (float32), as the searcher holds them."""
        return self.matrix[positions]


def normalise_vector(vector: Sequence[float] | np.ndarray, dimension: int) -> np.ndarray:
    query = np.asarray(vector, dtype=np.float32).reshape(-1)
    if query.shape[0] != dimension:
        raise ValueError(f"query vector has dimension {query.shape[0]}, index has {dimension}")
    norm = float(np.linalg.norm(query))
    return query / norm if norm else query
