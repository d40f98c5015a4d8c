"""The HNSW index over MemoryUnit.embedding, one per vector dimension, and whether this server may
use it: the one path that `manage.py hnsw_index`, the searcher and the system check share.

The embedding column has no fixed dimension (it follows the model), so each index is an expression
index over `embedding::vector(d)` limited to the rows of that dimension, named
`selection_memoryunit_embedding_hnsw_<d>` (migration 0002's opt-in index is the d=384 one).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from selection.memory.hnsw import support
from selection.memory.hnsw.searcher import TABLE, PgvectorHnswSearcher

DEFAULT_M = 16  # pgvector's defaults
DEFAULT_EF_CONSTRUCTION = 64
# the graph is built in memory while it fits (~0.6 GB for 100k 384-dimension vectors), far faster
DEFAULT_BUILD_MEMORY = "1GB"


def dense_mode() -> str:
    return getattr(settings, "FG_DENSE_SEARCHER", "memory")


def index_name(dimension: int) -> str:
    return f"{TABLE}_embedding_hnsw_{int(dimension)}"


def pgvector_version() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    return row[0] if row else None


_refusal: dict[str, str | None] = {}


def pgvector_refusal() -> str | None:
    """Why FG_DENSE_SEARCHER=pgvector-hnsw cannot run against this database, or None. Decided
    before any vector operator runs (support.py); kept per process."""
    key = connection.settings_dict.get("NAME", "")
    if key not in _refusal:
        refusal = support.refusal_for_version(pgvector_version())
        if refusal is None and getattr(settings, "EMBEDDED", False):
            cache = getattr(settings, "FG_INDEX_CACHE_DIR", "")
            refusal = support.embedded_refusal(Path(cache) if cache else None)
        _refusal[key] = refusal
    return _refusal[key]


def require_pgvector() -> None:
    refusal = pgvector_refusal()
    if refusal is not None:
        raise ImproperlyConfigured(refusal)


def index_options(dimension: int) -> dict[str, int] | None:
    """The HNSW index's build parameters for `dimension` ({"m", "ef_construction"}), or None where
    no valid index exists (a CONCURRENTLY build that failed leaves an invalid one)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.reloptions FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
            " WHERE c.relname = %s AND i.indisvalid",
            [index_name(dimension)],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    options = {"m": DEFAULT_M, "ef_construction": DEFAULT_EF_CONSTRUCTION}
    for item in row[0] or ():
        key, _, value = item.partition("=")
        if key in options:
            options[key] = int(value)
    return options


def embedding_dimensions() -> list[int]:
    """The vector dimensions the stored units have (no vector operator: vector_dims reads a header)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT vector_dims(embedding) FROM {TABLE} WHERE embedding IS NOT NULL ORDER BY 1"
        )
        return [row[0] for row in cursor.fetchall()]


def build_hnsw_index(
    *,
    dimension: int,
    m: int = DEFAULT_M,
    ef_construction: int = DEFAULT_EF_CONSTRUCTION,
    maintenance_work_mem: str = DEFAULT_BUILD_MEMORY,
) -> str:
    """Create the HNSW index for `dimension` (CONCURRENTLY outside a transaction, so imports and
    selections go on meanwhile); an invalid leftover of a failed build is dropped first. Returns
    what it did. Refuses, before any vector code runs, where pgvector cannot run here."""
    if not 1 <= int(dimension) <= 2000:
        raise ValueError(f"dimension must be 1..2000 (pgvector's HNSW limit for vector), not {dimension}")
    if not 2 <= int(m) <= 100 or not 4 <= int(ef_construction) <= 1000 or ef_construction < 2 * m:
        raise ValueError("m must be 2..100 and ef_construction 4..1000, at least 2·m (pgvector's limits)")
    require_pgvector()
    name = index_name(dimension)
    concurrently = "" if connection.in_atomic_block else " CONCURRENTLY"
    with connection.cursor() as cursor:
        if index_options(dimension) is not None:
            return f"{name} exists"
        if not concurrently:  # inside a transaction: deferred FK checks must run before an index
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"DROP INDEX{concurrently} IF EXISTS {name}")  # an invalid leftover
        cursor.execute("SELECT current_setting('maintenance_work_mem')")
        [previous] = cursor.fetchone()
        cursor.execute("SELECT set_config('maintenance_work_mem', %s, false)", [maintenance_work_mem])
        try:
            cursor.execute(
                f"CREATE INDEX{concurrently} {name} ON {TABLE} USING hnsw "
                f"((embedding::vector({int(dimension)})) vector_cosine_ops) "
                f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)}) "
                f"WHERE vector_dims(embedding) = {int(dimension)}"
            )
        finally:
            cursor.execute("SELECT set_config('maintenance_work_mem', %s, false)", [previous])
    return f"{name} built (m={int(m)}, ef_construction={int(ef_construction)})"


def drop_hnsw_index(*, dimension: int) -> str:
    name = index_name(dimension)
    concurrently = "" if connection.in_atomic_block else " CONCURRENTLY"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX{concurrently} IF EXISTS {name}")
    return f"{name} dropped"


def searcher_for_corpus(corpus_id: int, position: Mapping[str, int]) -> PgvectorHnswSearcher | None:
    """The PostgreSQL dense searcher of a corpus, positions as in `position` (unit id -> index
    position: CorpusIndex.position); None where some unit has no vector or the dimensions differ
    (no dense search then, as in memory)."""
    require_pgvector()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), count(embedding), min(vector_dims(embedding)),"
            f" max(vector_dims(embedding)) FROM {TABLE} WHERE corpus_id = %s",
            [corpus_id],
        )
        total, with_vector, low, high = cursor.fetchone()
        if not total or with_vector != total or low != high:
            return None
        cursor.execute(f"SELECT uid, id, project_id FROM {TABLE} WHERE corpus_id = %s", [corpus_id])
        rows = cursor.fetchall()
    if len(rows) != len(position) or any(uid not in position for uid, _, _ in rows):
        raise ValueError(f"corpus {corpus_id} changed while its index was built; ask again")
    row_ids = np.zeros(len(position), dtype=np.int64)
    project_ids = np.zeros(len(position), dtype=np.int64)
    for uid, row_id, project_id in rows:
        at = position[uid]
        row_ids[at], project_ids[at] = row_id, project_id
    return PgvectorHnswSearcher(
        corpus_id=corpus_id,
        dimension=low,
        row_ids=row_ids,
        project_ids=project_ids,
        ef_search=int(getattr(settings, "FG_HNSW_EF_SEARCH", 200)),
        index_options=index_options(low),
    )
