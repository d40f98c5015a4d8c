"""The engine index of a corpus, persisted so that a fresh web or worker process serves its first
selection after reading one file instead of rebuilding from rows (issue 17).

A file is named by the corpus and a fingerprint of everything the index is built from:

- the database cluster (`pg_control_system().system_identifier`, unique per initdb) and the
  database name, so that ids recycled by another cluster or a test database never match;
- the corpus's unit and link rows: their count, greatest id and the sum of their `xmin` (the
  transaction that last wrote each row: any UPDATE, DELETE or INSERT changes the sum, whoever
  made it — an erasure included), read in one cheap query;
- the engine's index code (a hash of `selection/engine/index/*.py` and `selection/engine/types.py`),
  so an upgrade never loads an index built by older code.

A file that is missing, unreadable or built for another fingerprint is ignored and the index is
rebuilt from rows (and written again). Files are pickles written by this process alone into
`FG_INDEX_CACHE_DIR` (default `.state/index-cache`; empty turns the cache off): that directory must
not be writable by anyone the server does not trust, like the database's own data directory.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile
from functools import cache
from pathlib import Path

from django.conf import settings
from django.db import connection

from selection.engine.index import CorpusIndex

log = logging.getLogger(__name__)

_ENGINE = Path(__file__).resolve().parent / "engine"


@cache
def _code_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted((_ENGINE / "index").glob("*.py")) + [_ENGINE / "types.py"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def cache_dir() -> Path | None:
    configured = getattr(settings, "FG_INDEX_CACHE_DIR", "")
    return Path(configured) if configured else None


def corpus_fingerprint(corpus_id: int) -> str:
    """What the index of `corpus_id` is built from, as a short hex digest (one query)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT (SELECT system_identifier FROM pg_control_system()), current_database(),
                   count(*), coalesce(max(u.id), 0), coalesce(sum(u.xmin::text::bigint), 0),
                   (SELECT count(*) || ':' || coalesce(sum(l.xmin::text::bigint), 0)
                      FROM selection_unitlink l JOIN selection_memoryunit s ON s.id = l.source_id
                     WHERE s.corpus_id = %s),
                   (SELECT count(*) || ':' || coalesce(sum(p.xmin::text::bigint), 0)
                      FROM selection_project p WHERE p.corpus_id = %s)
              FROM selection_memoryunit u WHERE u.corpus_id = %s
            """,
            [corpus_id, corpus_id, corpus_id],
        )
        row = cursor.fetchone()
    text = "\x1f".join(str(value) for value in row) + "\x1f" + _code_fingerprint()
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _path(directory: Path, corpus_id: int, fingerprint: str) -> Path:
    return directory / f"corpus-{corpus_id}-{fingerprint}.index"


def load(corpus_id: int, fingerprint: str) -> CorpusIndex | None:
    directory = cache_dir()
    if directory is None:
        return None
    path = _path(directory, corpus_id, fingerprint)
    try:
        with path.open("rb") as handle:
            index = pickle.load(handle)
    except FileNotFoundError:
        return None
    except Exception as error:  # a torn or foreign file is rebuilt, never served
        log.warning("index cache %s unreadable (%s); rebuilding from rows", path, error)
        return None
    if not isinstance(index, CorpusIndex):
        log.warning("index cache %s holds %s, not an index; rebuilding", path, type(index).__name__)
        return None
    return index


def discard(corpus_id: int) -> None:
    """Delete every index file of the corpus (an erasure leaves no copy of the old text on disk)."""
    directory = cache_dir()
    if directory is not None and directory.is_dir():
        for path in directory.glob(f"corpus-{corpus_id}-*.index"):
            path.unlink(missing_ok=True)


def store(corpus_id: int, fingerprint: str, index: CorpusIndex) -> Path | None:
    """Write the index atomically and drop this corpus's files of other fingerprints."""
    directory = cache_dir()
    if directory is None:
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = _path(directory, corpus_id, fingerprint)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".partial-", delete=False) as handle:
            pickle.dump(index, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(handle.name, path)
        for old in directory.glob(f"corpus-{corpus_id}-*.index"):
            if old != path:
                old.unlink(missing_ok=True)
        return path
    except OSError as error:  # a full or read-only disk costs the next start time, nothing else
        log.warning("index cache not written to %s: %s", directory, error)
        return None
