"""PgvectorHnswSearcher: the engine's DenseSearcher answered by PostgreSQL, with pgvector's HNSW
index, so that every web and worker process shares one index instead of each holding the vectors.

It holds no vectors, only the corpus's row ids and project ids in index-position order, and asks
PostgreSQL for each search:

    SELECT id, embedding::vector(d) <=> q FROM selection_memoryunit
     WHERE corpus_id = c AND vector_dims(embedding) = d [AND project_id = ANY(scope)]
     ORDER BY embedding::vector(d) <=> q LIMIT k

with `hnsw.iterative_scan = strict_order` (pgvector 0.8: the scan goes on past ef_search until the
filters have let k rows through, so a scope or a corpus filter keeps the pool full),
`hnsw.ef_search` from FG_HNSW_EF_SEARCH, and sorting disabled so that the planner answers from the
HNSW index and not from a sort of the whole corpus. Where the scan still returns fewer than k rows
(hnsw.max_scan_tuples reached: a small scope in a large table), an exact scan of the filtered rows
fills the pool.

Deterministic: hits are ordered by (cosine desc, position) like every engine searcher; the same
index answers the same query the same way. HNSW is approximate, and an index rebuilt from the same
rows may differ in its tail (pgvector draws node levels at random), so the trace's retriever config
names the searcher with its index parameters: `pgvector-hnsw(m=16,ef_construction=64,ef_search=200,
iterative_scan=strict_order)`, or `pgvector-exact(...)` while no HNSW index covers the dimension.
Cosines are pgvector's (float32 sums, as numpy's).
"""

from __future__ import annotations

import numpy as np
from django.db import connection, transaction

from selection.engine.index import DenseHits, normalise_vector

TABLE = "selection_memoryunit"


def vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form; float32 values print exactly and parse back to the same float32."""
    return "[" + ",".join(repr(value) for value in np.asarray(vector, dtype=np.float32).tolist()) + "]"


class PgvectorHnswSearcher:
    """Dense search over one corpus in PostgreSQL (see the module docstring)."""

    def __init__(
        self,
        *,
        corpus_id: int,
        dimension: int,
        row_ids: np.ndarray,
        project_ids: np.ndarray,
        ef_search: int,
        index_options: dict[str, int] | None,
    ):
        self.corpus_id = int(corpus_id)
        self.dimension = int(dimension)
        self.size = int(row_ids.shape[0])
        self.row_ids = np.asarray(row_ids, dtype=np.int64)  # position -> MemoryUnit id
        self.project_ids = np.asarray(project_ids, dtype=np.int64)  # position -> Project id
        self._by_row = np.argsort(self.row_ids, kind="stable")
        self._sorted_rows = self.row_ids[self._by_row]
        self.ef_search = int(ef_search)
        self.indexed = index_options is not None
        if self.indexed:
            params = ",".join(f"{key}={value}" for key, value in index_options.items())
            self.name = f"pgvector-hnsw({params},ef_search={self.ef_search},iterative_scan=strict_order)"
        else:
            self.name = f"pgvector-exact(no hnsw index for dimension {self.dimension})"

    # -- positions -------------------------------------------------------------------------------

    def positions_of(self, row_ids) -> np.ndarray:
        rows = np.asarray(row_ids, dtype=np.int64)
        return self._by_row[np.searchsorted(self._sorted_rows, rows)]

    def _ordered(self, rows: list[tuple[int, float]]) -> tuple[np.ndarray, np.ndarray]:
        """(positions, cosines) by (cosine desc, position asc)."""
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        positions = self.positions_of([row for row, _ in rows])
        cosines = 1.0 - np.asarray([distance for _, distance in rows], dtype=np.float64)
        order = np.lexsort((positions, -cosines))
        return positions[order], cosines[order]

    # -- SQL -------------------------------------------------------------------------------------

    def _fetch(
        self, literal: str, k: int, *, projects=None, rows=None, use_index: bool, explain: bool = False
    ) -> list:
        d = self.dimension
        expression = f"(embedding::vector({d})) <=> %(q)s::vector({d})"
        where = ["corpus_id = %(corpus)s", f"vector_dims(embedding) = {d}"]
        params: dict = {"q": literal, "corpus": self.corpus_id, "k": int(k)}
        if projects is not None:
            where.append("project_id = ANY(%(projects)s)")
            params["projects"] = [int(p) for p in projects]
        if rows is not None:
            where.append("id = ANY(%(rows)s)")
            params["rows"] = [int(r) for r in rows]
        sql = (
            f"SELECT id, {expression} FROM {TABLE} WHERE {' AND '.join(where)} "
            f"ORDER BY {expression} LIMIT %(k)s"
        )
        if connection.in_atomic_block:
            # SET LOCAL outlives a released savepoint; rolling this read-only one back keeps the
            # caller's transaction (a backtest chunk, a request) on its own planner settings
            savepoint = transaction.savepoint()
            try:
                return self._run(sql, params, k, use_index=use_index, explain=explain)
            finally:
                transaction.savepoint_rollback(savepoint)
        with transaction.atomic():
            return self._run(sql, params, k, use_index=use_index, explain=explain)

    def _run(self, sql: str, params: dict, k: int, *, use_index: bool, explain: bool) -> list:
        with connection.cursor() as cursor:
            if use_index:
                cursor.execute(
                    "SELECT set_config('hnsw.ef_search', %s, true),"
                    " set_config('hnsw.iterative_scan', 'strict_order', true),"
                    " set_config('enable_sort', 'off', true)",
                    [str(max(self.ef_search, int(k)))],
                )
            else:  # exact: a bitmap or sequential scan of the filtered rows, then a sort
                cursor.execute("SELECT set_config('enable_indexscan', 'off', true)")
            cursor.execute(("EXPLAIN " if explain else "") + sql, params)
            return cursor.fetchall()

    def plan(self, vector: np.ndarray, k: int) -> str:
        """PostgreSQL's plan for search(vector, k): which index answers it."""
        query = normalise_vector(vector, self.dimension)
        rows = self._fetch(vector_literal(query), k, use_index=self.indexed, explain=True)
        return "\n".join(row[0] for row in rows)

    def _search(self, query: np.ndarray, k: int, *, projects=None, rows=None, available: int) -> DenseHits:
        literal = vector_literal(query)
        k = min(int(k), available)
        found = self._fetch(literal, k, projects=projects, rows=rows, use_index=self.indexed) if k else []
        if len(found) < k:  # the iterative scan stopped at hnsw.max_scan_tuples: fill exactly
            found = self._fetch(literal, k, projects=projects, rows=rows, use_index=False)
        positions, cosines = self._ordered(found)
        known = dict(zip(positions.tolist(), cosines.tolist(), strict=True))
        return DenseHits(positions, known=known, exact=self._exact(literal))

    def _exact(self, literal: str):
        def exact(positions: np.ndarray) -> np.ndarray:
            positions = np.asarray(positions, dtype=np.int64)
            if positions.size == 0:
                return np.zeros(0, dtype=np.float64)
            rows = self.row_ids[positions]
            found = self._fetch(literal, positions.size, rows=rows, use_index=False)
            cosine = {row: 1.0 - distance for row, distance in found}
            return np.asarray([cosine[int(row)] for row in rows], dtype=np.float64)

        return exact

    # -- the DenseSearcher protocol --------------------------------------------------------------

    def search(self, vector: np.ndarray, k: int) -> DenseHits:
        query = normalise_vector(vector, self.dimension)
        return self._search(query, k, available=self.size)

    def top(self, vector: np.ndarray, k: int) -> np.ndarray:
        return self.search(vector, k).top

    def scores(self, vector: np.ndarray) -> np.ndarray:
        """Every unit's cosine, by position (one exact scan of the corpus)."""
        query = normalise_vector(vector, self.dimension)
        out = np.zeros(self.size, dtype=np.float64)
        positions, cosines = self._ordered(
            self._fetch(vector_literal(query), self.size, use_index=False)
        )
        out[positions] = cosines
        return out

    def search_scoped(self, vector: np.ndarray, k: int, allowed: np.ndarray) -> DenseHits:
        """The k best positions among `allowed` (a boolean mask), the filter run inside the scan:
        by project where the mask is a union of projects (a frame's scope), else by row id."""
        query = normalise_vector(vector, self.dimension)
        allowed = np.asarray(allowed, dtype=bool)
        available = int(allowed.sum())
        projects = np.unique(self.project_ids[allowed])
        if np.array_equal(np.isin(self.project_ids, projects), allowed):
            return self._search(query, k, projects=projects.tolist(), available=available)
        return self._search(query, k, rows=self.row_ids[allowed].tolist(), available=available)
