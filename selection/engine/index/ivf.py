"""IvfSearcher: approximate cosine search for large corpora, deterministic and exactly re-scored.

An inverted file in plain numpy: k-means (fixed seed, fixed iteration count, k-means++-free
deterministic init) splits the normalised vectors into `nlist` lists; a query scores the list
centroids and probes the `nprobe` best lists. Rows are stored grouped by list, so a probe is
`nprobe` contiguous matrix-vector products, not a gather.

The probe scans a compact int8 copy of the vectors (a quarter of float32's memory; one scale per
dimension, folded into the query), then rescores exactly, from the float32 rows, every probed
vector that could still be among the k best: the k best by the compact score, then every vector
whose compact score plus its own quantisation error bound (`error`, the norm of the row's
rounding error, so |q·v − compact| ≤ error for a unit query) reaches the k-th exact cosine. The
hits are therefore exactly those an exact scan of the probed lists returns, and every cosine
handed over is exact; the float32 rows are only read for those few candidates, so a memory-mapped
file serves them (selection/memory/index_cache.py).

Same inputs, same answer: the lists depend only on the vectors and the seed, probes are chosen by
(centroid score desc, list id), and hits are ordered by (cosine desc, position) as in NumpyExactSearcher.
A unit outside the probed lists still has its exact cosine on demand (`DenseHits.score`), so a
trace records a true cosine for every candidate whichever way it entered the pool.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from .dense import DenseHits, normalise_rows, normalise_vector
from .topk import top_k

DEFAULT_SEED = 20260901
KMEANS_ITERATIONS = 10
TRAIN_PER_LIST = 64  # k-means trains on at most this many sampled vectors per list
ASSIGN_CHUNK = 32768
SCAN_CHUNK = 512  # int8 rows widened to float32 at a time (fits in cache)
ERROR_SLACK = 1e-4  # float32 rounding of the compact and exact dot products, with a wide margin


def exact_cosines(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row's dot product with `query` in float32, summed by a fixed tree of column halves: a
    row's value never depends on which other rows are scored with it (a BLAS product's, or numpy's
    sum along an axis, can: both pick their order by the array's shape)."""
    terms = np.multiply(rows, query, dtype=np.float32)
    while terms.shape[1] > 1:
        half = terms.shape[1] // 2
        odd = terms[:, 2 * half :]
        terms = terms[:, :half] + terms[:, half : 2 * half]
        if odd.shape[1]:
            terms[:, :1] += odd
    return terms[:, 0] if terms.shape[1] else np.zeros(terms.shape[0], dtype=np.float32)


def quantise(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(int8 rows, per-dimension scale, per-row error bound): row ≈ codes / scale, and
    |q·row − q·(codes / scale)| ≤ error for any unit q."""
    if matrix.shape[0] == 0:
        return (np.zeros(matrix.shape, dtype=np.int8), np.ones(matrix.shape[1], dtype=np.float32),
                np.zeros(0, dtype=np.float32))
    peak = np.abs(matrix).max(axis=0)
    peak[peak == 0] = 1.0
    scale = (127.0 / peak).astype(np.float32)
    codes = np.empty(matrix.shape, dtype=np.int8)
    error = np.empty(matrix.shape[0], dtype=np.float32)
    for start in range(0, matrix.shape[0], ASSIGN_CHUNK):
        block = matrix[start : start + ASSIGN_CHUNK]
        rounded = np.clip(np.rint(block * scale), -127, 127)
        codes[start : start + ASSIGN_CHUNK] = rounded
        error[start : start + ASSIGN_CHUNK] = np.linalg.norm(block - rounded / scale, axis=1)
    return codes, scale, error


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
        centroids: np.ndarray | None = None,
        normalised: bool = False,
    ):
        matrix = np.ascontiguousarray(vectors, dtype=np.float32) if normalised else normalise_rows(vectors)
        self.size, self.dimension = int(matrix.shape[0]), int(matrix.shape[1])
        self.seed = seed
        if centroids is not None:  # lists trained elsewhere: named by their digest in the trace
            self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)
            self.nlist = int(self.centroids.shape[0])
            self.nprobe = min(nprobe or default_nprobe(self.nlist), self.nlist)
            trained = hashlib.sha256(self.centroids.tobytes()).hexdigest()[:12]
            self.name = f"numpy-ivf(nlist={self.nlist},nprobe={self.nprobe},lists={trained})"
            labels = _assign(matrix, self.centroids) if self.size else np.zeros(0, dtype=np.int64)
        else:
            self.nlist = min(nlist or default_nlist(self.size), max(self.size, 1))
            self.nprobe = min(nprobe or default_nprobe(self.nlist), self.nlist)
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
        self.matrix = np.ascontiguousarray(matrix[order])  # float32, read only to rescore
        del matrix
        self.codes, self.scale, self.error = quantise(self.matrix)  # the compact copy probes scan
        self.labels = labels
        counts = np.bincount(labels, minlength=self.nlist)
        self.offsets = np.zeros(self.nlist + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])

    def _approximate(self, rows: slice, scaled: np.ndarray, buffer: np.ndarray) -> np.ndarray:
        """Compact scores of stored rows `rows` (int8 widened chunk by chunk)."""
        out = np.empty(rows.stop - rows.start, dtype=np.float32)
        for start in range(rows.start, rows.stop, SCAN_CHUNK):
            stop = min(start + SCAN_CHUNK, rows.stop)
            block = buffer[: stop - start]
            np.copyto(block, self.codes[start:stop], casting="unsafe")
            np.matmul(block, scaled, out=out[start - rows.start : stop - rows.start])
        return out

    def probe(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(probed list ids, stored rows, compact scores) of every vector in the probed lists."""
        lists = top_k(self.centroids @ query, self.nprobe)
        scaled = (query / self.scale).astype(np.float32)
        buffer = np.empty((SCAN_CHUNK, self.dimension), dtype=np.float32)
        rows = [np.arange(self.offsets[lst], self.offsets[lst + 1]) for lst in lists.tolist()]
        parts = [
            self._approximate(slice(int(self.offsets[lst]), int(self.offsets[lst + 1])), scaled, buffer)
            for lst in lists.tolist()
        ]
        if not parts:
            return lists, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return lists, np.concatenate(rows), np.concatenate(parts)

    def scores(self, vector: np.ndarray) -> np.ndarray:
        """Exact cosine of every unit (a full scan; search() is the fast path)."""
        query = normalise_vector(vector, self.dimension)
        out = np.empty(self.size, dtype=np.float32)
        for start in range(0, self.size, ASSIGN_CHUNK):
            out[self.order[start : start + ASSIGN_CHUNK]] = exact_cosines(
                self.matrix[start : start + ASSIGN_CHUNK], query
            )
        return out

    def top(self, vector: np.ndarray, k: int) -> np.ndarray:
        return self.search(vector, k).top

    def search(self, vector: np.ndarray, k: int) -> DenseHits:
        query = normalise_vector(vector, self.dimension)
        _lists, rows, approx = self.probe(query)
        if rows.size == 0 or k <= 0:
            return DenseHits(
                np.zeros(0, dtype=np.int64), known={}, exact=self._exact(query), bounds=self._bounds(query)
            )
        # rescore the k best by compact score, then everything that could still beat the k-th
        first = np.argpartition(-approx, k - 1)[:k] if approx.size > k else np.arange(approx.size)
        exact = exact_cosines(self.matrix[np.sort(rows[first])], query)
        threshold = np.partition(exact, exact.size - k)[exact.size - k] if exact.size >= k else -np.inf
        chosen = np.flatnonzero(approx + self.error[rows] + ERROR_SLACK >= threshold)
        stored = np.sort(rows[chosen])
        cosines = exact_cosines(self.matrix[stored], query)
        positions = self.order[stored]
        # order by (cosine desc, position asc), as an exact scan of the probed lists would
        best = np.lexsort((positions, -cosines))[:k]
        top = positions[best]
        known = dict(zip(positions.tolist(), cosines.tolist(), strict=True))
        return DenseHits(top, known=known, exact=self._exact(query), bounds=self._bounds(query))

    def cosines(self, query: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Exact cosine of a normalised query to the given positions (a scope's rows)."""
        return self.matrix[self.row_of[positions]] @ query

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The normalised vectors of `positions` (float32), as the searcher holds them."""
        return self.matrix[self.row_of[positions]]

    def _bounds(self, query: np.ndarray):
        """Bounds of the exact cosines of any positions from the int8 codes: the compact score
        ± the row's quantisation error bound ± ERROR_SLACK (what search() trusts to rescore)."""
        codes, row_of, error = self.codes, self.row_of, self.error
        scaled = (query / self.scale).astype(np.float32)

        def bounds(positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            rows = row_of[positions]
            approx = (codes[rows].astype(np.float32) @ scaled).astype(np.float64)
            margin = error[rows].astype(np.float64) + ERROR_SLACK
            return approx - margin, approx + margin

        return bounds

    def _exact(self, query: np.ndarray):
        matrix, row_of = self.matrix, self.row_of

        def exact(positions: np.ndarray) -> np.ndarray:
            return exact_cosines(matrix[row_of[positions]], query)

        return exact
