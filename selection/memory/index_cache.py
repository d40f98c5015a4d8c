"""The engine index of a corpus, persisted so that a fresh web or worker process serves its first
selection after reading one file instead of rebuilding from rows.

A file is named by the corpus and a fingerprint of everything the index is built from:

- the database cluster (`pg_control_system().system_identifier`, unique per initdb) and the
  database name, so that ids recycled by another cluster or a test database never match;
- the corpus's unit and link rows: their count, greatest id and the sum of their `xmin` (the
  transaction that last wrote each row: any UPDATE, DELETE or INSERT changes the sum, whoever
  made it — an erasure included), read in one cheap query;
- the engine's index code (a hash of `selection/engine/index/*.py` and `selection/engine/types.py`),
  so an upgrade never loads an index built by older code.

An index is a directory `corpus-<id>-<fingerprint>.index/` of three files:

- `arrays.bin`: every numpy array of the index (whatever object holds it: the BM25 postings and
  weights, the term lists, the dense searcher's int8 codes and float32 rows, any array a later
  change adds), raw and 64-byte aligned, read back as views of one copy-on-write memory map
  (random-access advice, no readahead): loading costs no copy, and a page is read from disk, and
  counts in the process's RSS, only when a query first touches it;
- `skeleton.pickle`: the rest of the object graph (dictionaries, the unit ids as one string),
  each array replaced by its place in `arrays.bin`. The units themselves are columns
  (`selection.engine.index.units.UnitTable`: texts and titles as UTF-8 arrays with offsets,
  project and class codes, dates as integers, the rarer fields as one pickled dict per unit in a
  bytes array), so reading the index makes no Unit object: a selection makes the few hundred it
  reads (format 2; format 1 pickled every Unit, ~70 % of a read);
- `meta.json`, written last: the format and both files' byte sizes.

A directory that is missing, unreadable, torn (a file shorter or longer than meta.json says) or
built for another fingerprint is ignored and the index is rebuilt from rows (and written again).
A directory is written under a temporary name and renamed whole, so a crash leaves no directory
under a real name. Files are written by this process alone into `FG_INDEX_CACHE_DIR` (default
`.state/index-cache`; empty turns the cache off): that directory must not be writable by anyone
the server does not trust, like the database's own data directory.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import math
import mmap
import os
import pickle
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import BinaryIO

import numpy as np
from django.conf import settings
from django.db import connection

from selection.engine.index import CorpusIndex

log = logging.getLogger(__name__)

_ENGINE = Path(__file__).resolve().parent.parent / "engine"


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


def base_key(corpus_id: int, *, hnsw: bool = False) -> str:
    """What a base index of `corpus_id` is valid for besides its units: the cluster, the
    database, the corpus's project rows and the engine's index code (one query). The units are
    checked one by one against the base's row stamps when it is read (selection.memory.live_index)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT (SELECT system_identifier FROM pg_control_system()), current_database(),
                   count(*) || ':' || coalesce(sum(p.xmin::text::bigint), 0)
              FROM selection_project p WHERE p.corpus_id = %s
            """,
            [corpus_id],
        )
        row = cursor.fetchone()
    text = "\x1f".join(str(value) for value in row) + "\x1f" + _code_fingerprint() + ("-hnsw" if hnsw else "")
    return hashlib.sha256(text.encode()).hexdigest()[:24]


ARRAYS = "arrays.bin"
SKELETON = "skeleton.pickle"
META = "meta.json"
_ALIGN = 64
_FORMAT = "fg-index-2"  # 2: units as columns (UnitTable)


def _path(directory: Path, corpus_id: int, fingerprint: str) -> Path:
    return directory / f"corpus-{corpus_id}-{fingerprint}.index"


def _base_name(key: str, revision: int, sequence: int) -> str:
    return f"{key}-r{revision}-s{sequence}"


def load_base(corpus_id: int, key: str, revision: int, sequence: int) -> tuple[CorpusIndex, int] | None:
    """The newest readable base index of the corpus for `key` and `revision` that covers at most
    `sequence`, with the sequence it covers; None if there is none."""
    directory = cache_dir()
    if directory is None or not directory.is_dir():
        return None
    prefix = f"corpus-{corpus_id}-{key}-r{revision}-s"
    found = []
    for path in directory.glob(prefix + "*.index"):
        covered = path.name[len(prefix) : -len(".index")]
        if covered.isdigit() and int(covered) <= sequence:
            found.append((int(covered), path))
    for covered, path in sorted(found, reverse=True):
        try:
            return read_index(path), covered
        except Exception as error:  # a torn or foreign file is passed over, never served
            log.warning("index cache %s unreadable (%s); passed over", path, error)
    return None


def store_base(corpus_id: int, key: str, revision: int, sequence: int, index: CorpusIndex) -> Path | None:
    """Write a base index covering `sequence` atomically (store()), then drop the corpus's other
    indexes: until the rename, the previous base is the one a reader finds."""
    return store(corpus_id, _base_name(key, revision, sequence), index)


class _ArrayPickler(pickle.Pickler):
    """Pickles the object graph with every numeric numpy array written to `arrays` instead."""

    def __init__(self, skeleton: BinaryIO, arrays: BinaryIO):
        super().__init__(skeleton, protocol=pickle.HIGHEST_PROTOCOL)
        self.arrays = arrays
        self.offset = 0
        self.seen: dict[int, tuple] = {}
        self.kept: list[np.ndarray] = []  # alive until the dump ends, so ids are not reused

    def persistent_id(self, obj):
        if type(obj) is not np.ndarray and not isinstance(obj, np.memmap):
            return None
        if obj.dtype.hasobject or obj.dtype.fields is not None:
            return None  # object or structured arrays: pickled as they are
        ref = self.seen.get(id(obj))
        if ref is not None:
            return ref
        data = np.ascontiguousarray(obj)
        padding = -self.offset % _ALIGN
        if padding:
            self.arrays.write(b"\0" * padding)
            self.offset += padding
        ref = ("array", self.offset, data.dtype.str, data.shape)
        self.arrays.write(memoryview(data).cast("B") if data.nbytes else b"")
        self.offset += data.nbytes
        self.seen[id(obj)] = ref
        self.kept.append(obj)
        return ref


class _ArrayUnpickler(pickle.Unpickler):
    def __init__(self, skeleton: BinaryIO, arrays: mmap.mmap | bytearray):
        super().__init__(skeleton)
        self.arrays = arrays
        self.size = len(arrays)

    def persistent_load(self, pid):
        kind, offset, dtype, shape = pid
        if kind != "array":
            raise pickle.UnpicklingError(f"unknown persistent id {kind!r}")
        dtype = np.dtype(dtype)
        if offset + math.prod(shape) * dtype.itemsize > self.size:
            raise pickle.UnpicklingError("array beyond the end of arrays.bin")
        return np.ndarray(shape, dtype=dtype, buffer=self.arrays, offset=offset)


def write_index(path: Path, index: CorpusIndex) -> None:
    """Write `index` as a directory at `path` (which must not exist): arrays and skeleton, then
    meta.json with both files' sizes."""
    path.mkdir(mode=0o700)
    with (path / ARRAYS).open("wb") as arrays, (path / SKELETON).open("wb") as skeleton:
        pickler = _ArrayPickler(skeleton, arrays)
        pickler.dump(index)
        for handle in (arrays, skeleton):
            handle.flush()
            os.fsync(handle.fileno())
        sizes = {ARRAYS: pickler.offset, SKELETON: skeleton.tell()}
    (path / META).write_text(json.dumps({"format": _FORMAT, "bytes": sizes}))


def read_index(path: Path) -> CorpusIndex:
    """Read a directory written by write_index; raises on a torn or foreign one."""
    meta = json.loads((path / META).read_text())
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise ValueError(f"not an index of format {_FORMAT}")
    for name, expected in meta["bytes"].items():
        size = os.path.getsize(path / name)
        if size != expected:
            raise ValueError(f"{name} holds {size} bytes, meta.json names {expected}")
    size = meta["bytes"][ARRAYS]
    if size:
        # a copy-on-write map: an in-place write (none is expected) would stay private to this
        # process and never reach the file. Random access advice: a query touches a few rows of
        # the float32 vectors or the term lists here and there, and readahead would otherwise
        # page in (and count in RSS) their neighbours too
        with (path / ARRAYS).open("rb") as handle:
            arrays = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
        if hasattr(arrays, "madvise") and hasattr(mmap, "MADV_RANDOM"):
            arrays.madvise(mmap.MADV_RANDOM)
    else:
        arrays = bytearray()
    collecting = gc.isenabled()
    gc.disable()  # a million new objects would run the cyclic collector over and over: half the time
    try:
        with (path / SKELETON).open("rb") as skeleton:
            index = _ArrayUnpickler(skeleton, arrays).load()
    finally:
        if collecting:
            gc.enable()
    if not isinstance(index, CorpusIndex):
        raise ValueError(f"holds {type(index).__name__}, not an index")
    return index


def load(corpus_id: int, fingerprint: str) -> CorpusIndex | None:
    directory = cache_dir()
    if directory is None:
        return None
    path = _path(directory, corpus_id, fingerprint)
    if not path.exists():
        return None
    try:
        return read_index(path)
    except Exception as error:  # a torn or foreign file is rebuilt, never served
        log.warning("index cache %s unreadable (%s); rebuilding from rows", path, error)
        return None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def discard(corpus_id: int) -> None:
    """Delete every index of the corpus (an erasure leaves no copy of the old text on disk)."""
    directory = cache_dir()
    if directory is not None and directory.is_dir():
        for path in directory.glob(f"corpus-{corpus_id}-*.index"):
            _remove(path)


def store(corpus_id: int, fingerprint: str, index: CorpusIndex) -> Path | None:
    """Write the index atomically and drop this corpus's indexes of other fingerprints."""
    directory = cache_dir()
    if directory is None:
        return None
    partial: Path | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = _path(directory, corpus_id, fingerprint)
        partial = Path(tempfile.mkdtemp(dir=directory, prefix=".partial-"))
        partial.rmdir()
        write_index(partial, index)
        if path.exists():
            _remove(path)  # a torn directory of the same fingerprint
        os.replace(partial, path)
        partial = None
        for old in directory.glob(f"corpus-{corpus_id}-*.index"):
            if old != path:
                _remove(old)
        return path
    except OSError as error:  # a full or read-only disk costs the next start time, nothing else
        log.warning("index cache not written to %s: %s", directory, error)
        return None
    finally:
        if partial is not None:
            _remove(partial)
