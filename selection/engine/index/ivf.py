"""IvfSearcher: approximate cosine search for large corpora, deterministic and exactly re-scored.

An inverted file in plain numpy: k-means (fixed seed, fixed iteration count, k-means++-free
deterministic init) splits the normalised vectors into `nlist` lists; a query scores the list
centroids, probes the `nprobe` best lists and scores every vector in them exactly. Rows are stored
grouped by list, so a probe is `nprobe` contiguous matrix-vector products, not a gather.

Same inputs, same answer: the lists depend only on the vectors and the seed, probes are chosen by
(centroid score desc, list id), and hits are ordered by (cosine desc, position) as in NumpyExactSearcher.
A unit outside the probed lists still has its exact cosine on demand (`DenseHits.score`), so a
trace records a true cosine for every candidate whichever way it entered the pool.
"""

from __future__ import annotations

import math

import numpy as np

from .dense import DenseHits, normalise_rows, normalise_vector
from .topk import top_k

DEFAULT_SEED = 20260901
KMEANS_ITERATIONS = 10
TRAIN_PER_LIST = 64  # k-means trains on at most this many sampled vectors per list
ASSIGN_CHUNK = 32768


def default_nlist(size: int) -> int:
    """About 2·sqrt(N) lists: 632 at 100k, 2000 at 1M (~500 vectors a list)."""
    return max(1, min(size, int(round(2 * math.sqrt(size)))))


def default_nprobe(nlist: int) -> int:
    """1/64 of the lists, at least 16 (16 of 632 at 100k, 31 of 2000 at 1M: ~1.5-2.5 % of the
    vectors scanned); recall against exact search is in docs/performance.md."""
    return max(1, min(nlist, max(16, nlist // 64)))


def _assign(matrix: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the most similar centroid per row; ties go to the lower list id (argmax)."""
    out = np.empty(matrix.shape[0], dtype=np.int64)
    for start in range(0, matrix.shape[0], ASSIGN_CHUNK):
        block = matrix[start : start + ASSIGN_CHUNK] @ centroids.T
        out[start : start + ASSIGN_CHUNK] = np.argmax(block, axis=1)
    return out


def spherical_kmeans(
    matrix: np.ndarray, nlist: int, *, seed: int = DEFAULT_SEED, iterations: int = KMEANS_ITERATIONS
) -> np.ndarray:
    """Unit-norm centroids from a fixed-seed sample; an emptied list keeps its previous centroid."""
    rng = np.random.default_rng(seed)
    n = matrix.shape[0]
    train_n = min(n, nlist * TRAIN_PER_LIST)
    sample = matrix[np.sort(rng.choice(n, size=train_n, replace=False))] if train_n < n else matrix
    centroids = sample[np.sort(rng.choice(sample.shape[0], size=nlist, replace=False))].copy()
    for _ in range(iterations):
        labels = _assign(sample, centroids)
        order = np.argsort(labels, kind="stable")
        counts = np.bincount(labels, minlength=nlist)
        filled = np.flatnonzero(counts)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))[filled]
        sums = np.add.reduceat(sample[order], starts, axis=0, dtype=np.float64)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        centroids[filled] = (sums / norms).astype(np.float32)
    return np.ascontiguousarray(centroids, dtype=np.float32)


class IvfSearcher:
    """Inverted-file cosine search behind the DenseSearcher protocol (see module docstring)."""

    def __init__(
        self,
        vectors: np.ndarray,
        *,
        nlist: int | None = None,
        nprobe: int | None = None,
        seed: int = DEFAULT_SEED,
    ):
        matrix = normalise_rows(vectors)
        self.size, self.dimension = int(matrix.shape[0]), int(matrix.shape[1])
        self.nlist = min(nlist or default_nlist(self.size), max(self.size, 1))
        self.nprobe = min(nprobe or default_nprobe(self.nlist), self.nlist)
        self.seed = seed
        self.name = f"numpy-ivf(nlist={self.nlist},nprobe={self.nprobe},seed={seed})"
        if self.size == 0:
            self.centroids = np.zeros((0, self.dimension), dtype=np.float32)
            labels = np.zeros(0, dtype=np.int64)
        else:
            self.centroids = spherical_kmeans(matrix, self.nlist, seed=seed)
            labels = _assign(matrix, self.centroids)
        # rows grouped by list, positions ascending inside a list
        order = np.lexsort((np.arange(self.size), labels))
        self.order = order  # stored row -> unit position
        self.row_of = np.empty(self.size, dtype=np.int64)  # unit position -> stored row
        self.row_of[order] = np.arange(self.size)
        self.matrix = np.ascontiguousarray(matrix[order])
        del matrix
        self.labels = labels
        counts = np.bincount(labels, minlength=self.nlist)
        self.offsets = np.zeros(self.nlist + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])

    def probe(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(probed list ids, unit positions, cosines) of every vector in the probed lists."""
        lists = top_k(self.centroids @ query, self.nprobe)
        rows = [np.arange(self.offsets[lst], self.offsets[lst + 1]) for lst in lists.tolist()]
        parts = [self.matrix[self.offsets[lst] : self.offsets[lst + 1]] @ query for lst in lists]
        if not parts:
            return lists, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        row_ids = np.concatenate(rows)
        return lists, self.order[row_ids], np.concatenate(parts)

    def scores(self, vector: np.ndarray) -> np.ndarray:
        """Exact cosine of every unit (a full scan; search() is the fast path)."""
        query = normalise_vector(vector, self.dimension)
        out = np.empty(self.size, dtype=np.float32)
        out[self.order] = self.matrix @ query
        return out

    def top(self, vector: np.ndarray, k: int) -> np.ndarray:
        return self.search(vector, k).top

    def search(self, vector: np.ndarray, k: int) -> DenseHits:
        query = normalise_vector(vector, self.dimension)
        _lists, positions, cosines = self.probe(query)
        if positions.size == 0:
            return DenseHits(np.zeros(0, dtype=np.int64), known={}, exact=self._exact(query))
        # order by (cosine desc, position asc); every hit tied with the cut competes on position
        if cosines.size > k:
            part = np.argpartition(-cosines, k - 1)[:k]
            chosen = np.flatnonzero(cosines >= cosines[part].min())
        else:
            chosen = np.arange(cosines.size)
        chosen = chosen[np.lexsort((positions[chosen], -cosines[chosen]))[:k]]
        top = positions[chosen]
        known = dict(zip(top.tolist(), cosines[chosen].tolist(), strict=True))
        return DenseHits(top, known=known, exact=self._exact(query))

    def cosines(self, query: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Exact cosine of a normalised query to the given positions (a scope's rows)."""
        return self.matrix[self.row_of[positions]] @ query

    def _exact(self, query: np.ndarray):
        matrix, row_of = self.matrix, self.row_of

        def exact(positions: np.ndarray) -> np.ndarray:
            return matrix[row_of[positions]] @ query

        return exact
