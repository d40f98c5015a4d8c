"""The index that follows writes: a base index plus the units changed since, per process.

PostgreSQL is the one source of truth and no process talks to another. Each process holds, per
corpus:

- a **base**: an engine index of the corpus's units at memory sequence B, read from the index
  cache (selection/memory/index_cache.py: `corpus-<id>-<key>-r<revision>-s<B>.index`) or built
  from rows once, and checked unit by unit against the rows it was built from (`row_stamps`:
  each unit row's id and `xmin`; a row at or below B whose `xmin` moved was changed outside the
  memory sequence, and the base is rebuilt);
- the **delta**: the units whose rows changed after B (`sequence > B`, tailed from the rows the
  memory sequence stamps: selection.memory.as_of), superseded, erased, declined and admitted ones
  included: each is a tombstone of its base version plus its state now (if active).

Every selection reads the corpus's `sequence` and `revision` (one primary-key query). When the
sequence moved, the index at the new sequence is assembled from the base and the delta
(selection.engine.index.assembly.assemble: bit-identical to an index rebuilt from the rows at
that sequence), and served until the sequence moves again; a selection that finds another thread
assembling serves the index it has (its trace records that index's sequence). When the delta
holds MERGE_AT units or more, the assembled index is written as the new base in a background
thread (atomically: a crash mid-write leaves the old base and the delta, which assemble the same
index). A revision change (an erasure) drops everything: the base is rebuilt from rows.

`corpus_index(corpus, as_of=N)` is the index of memory as of sequence N (a replay's): the base
with the units changed after min(B, N) replaced by their state at N; kept in a small LRU.

Every index served carries `memory_sequence` (the sequence it covers) and `fingerprint` (the base
key, the revision and the sequence: what a result computed over it depends on).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
from collections import ChainMap, OrderedDict
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import close_old_connections

from selection.engine.index import IVF_THRESHOLD, CorpusIndex, normalise_rows
from selection.engine.index.assembly import assemble
from selection.engine.index.ivf import default_nlist, spherical_kmeans
from selection.engine.routing.route import routing_corpus
from selection.memory import as_of as memory_as_of
from selection.memory import index_cache
from selection.memory.hnsw.index import dense_mode, searcher_for_corpus
from selection.models import Corpus

log = logging.getLogger(__name__)

MERGE_AT = 256  # delta units from which the assembled index becomes the new base (FG_LIVE_MERGE_AT)
AS_OF_KEPT = 4  # indexes of past sequences kept per corpus
CORPORA_KEPT = 4  # corpora a process keeps live indexes of


@dataclass
class _Live:
    corpus_id: int
    revision: int
    key: str
    hnsw: bool
    base: CorpusIndex
    base_sequence: int
    current: CorpusIndex
    # the delta: every unit changed after the base, as of `delta_sequence` (None: not active then),
    # with its vector, created_sequence and row stamp; tailed a change at a time
    delta_sequence: int = 0
    delta: dict = field(default_factory=dict)  # uid -> (Unit | None, vector | None)
    delta_created: dict = field(default_factory=dict)
    delta_stamps: dict = field(default_factory=dict)
    past: OrderedDict = field(default_factory=OrderedDict)  # sequence -> index
    lock: threading.Lock = field(default_factory=threading.Lock)
    merging: threading.Thread | None = None


_LIVE: OrderedDict[int, _Live] = OrderedDict()
_live_lock = threading.Lock()


def merge_at() -> int:
    return int(getattr(settings, "FG_LIVE_MERGE_AT", MERGE_AT))


def _stamped(index: CorpusIndex, *, sequence: int, key: str, revision: int, stamps: dict | None = None) -> CorpusIndex:
    index.memory_sequence = sequence
    index.fingerprint = f"{key}:r{revision}:s{sequence}"
    if stamps is not None:
        ids = np.fromiter(sorted(stamps), dtype=np.int64, count=len(stamps))
        index.row_stamps = (ids, np.asarray([stamps[i] for i in ids.tolist()], dtype=np.int64))
    return index


def _stamps_of(index: CorpusIndex) -> dict[int, int]:
    ids, xmins = getattr(index, "row_stamps", (np.zeros(0, np.int64), np.zeros(0, np.int64)))
    return dict(zip(ids.tolist(), xmins.tolist(), strict=True))


def _base_valid(corpus_id: int, index: CorpusIndex, covered: int) -> bool:
    """Whether every unit row at or below `covered` is the row the base was built from."""
    stamps = _stamps_of(index)
    rows = memory_as_of.row_stamps(corpus_id, upto=covered)
    return all(stamps.get(row_id) == xmin for row_id, xmin in rows)


def _attach(index: CorpusIndex, corpus_id: int, hnsw: bool) -> CorpusIndex:
    if hnsw:  # attached per process: the HNSW index may be built or dropped meanwhile
        index.dense = searcher_for_corpus(corpus_id, index.position)
    routing_corpus(index.units)  # routing's per-corpus structure, built with the index
    return index


def _build(corpus_id: int, as_of: int | None, *, hnsw: bool) -> tuple[CorpusIndex, memory_as_of.Changed]:
    """An index of the corpus's units as of `as_of` (None: now) rebuilt from rows."""
    read = memory_as_of.units_as_of(corpus_id, as_of, with_vectors=not hnsw)
    units, vectors, centroids = list(read.units), read.vectors, None
    if vectors is not None and len(units) >= IVF_THRESHOLD:
        order = sorted(range(len(units)), key=lambda i: units[i].id)
        units, vectors = [units[i] for i in order], vectors[np.asarray(order, dtype=np.int64)]
        centroids = quantizer(corpus_id, read.created)(units, normalise_rows(vectors))
    return CorpusIndex.build(units, vectors, centroids=centroids), read


_QUANTIZERS: OrderedDict[tuple, np.ndarray] = OrderedDict()


def quantizer(corpus_id: int, created: dict[str, int]):
    """The IVF's lists of a live corpus of IVF_THRESHOLD units or more, as a function of its units
    (id order) and their normalised rows: k-means over the rows of the IVF_THRESHOLD units first
    written (created_sequence, then id), default_nlist(IVF_THRESHOLD) lists. Later writes never
    change which units those are, so every process, every base and every rebuild at a later
    sequence probes the same lists (trained once per process: kept by the units' ids)."""

    def centroids(units, rows: np.ndarray) -> np.ndarray:
        chosen = sorted(range(len(units)), key=lambda i: (created.get(units[i].id, 0), units[i].id))
        chosen = sorted(chosen[:IVF_THRESHOLD])
        key = (corpus_id, hashlib.sha256("\x00".join(units[i].id for i in chosen).encode()).hexdigest())
        with _live_lock:
            found = _QUANTIZERS.get(key)
        if found is None:
            found = spherical_kmeans(rows[np.asarray(chosen, dtype=np.int64)], default_nlist(IVF_THRESHOLD))
            with _live_lock:
                _QUANTIZERS[key] = found
                while len(_QUANTIZERS) > CORPORA_KEPT:
                    _QUANTIZERS.popitem(last=False)
        return found

    return centroids


def _load(corpus_id: int, sequence: int, revision: int) -> _Live:
    hnsw = dense_mode() == "pgvector-hnsw"
    key = index_cache.base_key(corpus_id, hnsw=hnsw)
    found = index_cache.load_base(corpus_id, key, revision, sequence)
    if found is not None and _base_valid(corpus_id, found[0], found[1]):
        base, covered = found
        _stamped(base, sequence=covered, key=key, revision=revision)
    else:
        base, read = _build(corpus_id, None, hnsw=hnsw)
        covered = read.sequence  # the sequence of the snapshot the rows were read in
        _stamped(base, sequence=covered, key=key, revision=revision, stamps=read.stamps)
        base.created_sequences = read.created
        index_cache.store_base(corpus_id, key, revision, covered, base)
    _attach(base, corpus_id, hnsw)
    return _Live(corpus_id, revision, key, hnsw, base, covered, base, delta_sequence=covered)


def _tail(live: _Live) -> int:
    """Read the units changed since the delta was last read into it; returns the sequence of the
    snapshot they were read in."""
    changed = memory_as_of.units_changed(
        live.corpus_id, since=live.delta_sequence, as_of=None, with_vectors=not live.hnsw
    )
    vectors = changed.vectors
    at = {u.id: i for i, u in enumerate(changed.units)}
    for uid in changed.ids:
        i = at.get(uid)
        unit = changed.units[i] if i is not None else None
        vector = vectors[i] if (unit is not None and vectors is not None) else None
        live.delta[uid] = (unit, vector, unit is not None and vectors is None and not live.hnsw)
    live.delta_created.update(changed.created)
    live.delta_stamps.update(changed.stamps)
    live.delta_sequence = changed.sequence
    return changed.sequence


def _from_base(live: _Live, ids, units, vectors, *, as_of: int | None) -> CorpusIndex:
    """The base with `ids` dropped and `units` (with `vectors`) added: assembled, or rebuilt from
    rows where a unit without a vector joins or leaves (no dense search then, as a rebuild decides)."""
    base = live.base
    if not ids:
        return copy.copy(base)  # the same index, stamped with its own sequence
    if live.hnsw or (base.dense is not None and (vectors is not None or not units)):
        created = ChainMap(live.delta_created, getattr(base, "created_sequences", {}))
        return assemble(
            base, drop=ids, add=units, vectors=vectors, dense=not live.hnsw,
            centroids=quantizer(live.corpus_id, created),
        )  # fmt: skip
    return _build(live.corpus_id, as_of, hnsw=live.hnsw)[0]


def _now(live: _Live) -> tuple[CorpusIndex, int]:
    """The index now from the base and the tailed delta; and how many units the delta holds."""
    sequence = _tail(live)
    entries = list(live.delta.items())
    units = [unit for _, (unit, _, _) in entries if unit is not None]
    vectors = None
    if not live.hnsw and units and not any(missing for _, (_, _, missing) in entries):
        vectors = np.vstack([vector for _, (unit, vector, _) in entries if unit is not None])
    index = _from_base(live, [uid for uid, _ in entries], units, vectors, as_of=None)
    _stamped(index, sequence=sequence, key=live.key, revision=live.revision)
    return _attach(index, live.corpus_id, live.hnsw), len(entries)


def _as_of(live: _Live, as_of: int) -> CorpusIndex:
    """The index as of an earlier sequence: the base with the units changed after min(B, as_of)
    replaced by their state then (read afresh, not tailed)."""
    changed = memory_as_of.units_changed(
        live.corpus_id, since=live.base_sequence, as_of=as_of, with_vectors=not live.hnsw
    )
    index = _from_base(live, changed.ids, changed.units, changed.vectors, as_of=as_of)
    _stamped(index, sequence=min(as_of, changed.sequence), key=live.key, revision=live.revision)
    return _attach(index, live.corpus_id, live.hnsw)


def _merged_stamps(live: _Live, index: CorpusIndex) -> None:
    """Row stamps and created sequences of a merged base: the base's, with the delta's over them."""
    stamps = {**_stamps_of(live.base), **live.delta_stamps}
    ids = np.fromiter(sorted(stamps), dtype=np.int64, count=len(stamps))
    index.row_stamps = (ids, np.asarray([stamps[i] for i in ids.tolist()], dtype=np.int64))
    created = ChainMap(live.delta_created, getattr(live.base, "created_sequences", {}))
    index.created_sequences = {uid: created[uid] for uid in index.position if uid in created}


def _merge(live: _Live, index: CorpusIndex) -> None:
    """Write `index` as the corpus's new base, then serve it as the base (a background thread);
    the delta is then read again from the new base's sequence."""
    try:
        index_cache.store_base(live.corpus_id, live.key, live.revision, index.memory_sequence, index)
        with live.lock:
            if index.memory_sequence > live.base_sequence:
                live.base, live.base_sequence = index, index.memory_sequence
                live.delta, live.delta_created, live.delta_stamps = {}, {}, {}
                live.delta_sequence = index.memory_sequence
    except Exception:  # the old base and the delta keep serving the same index
        log.exception("merging the delta of corpus %s into a new base failed", live.corpus_id)
    finally:
        live.merging = None
        close_old_connections()


def _live(corpus_id: int, sequence: int, revision: int) -> _Live:
    with _live_lock:
        live = _LIVE.get(corpus_id)
        if live is not None and live.revision == revision:
            _LIVE.move_to_end(corpus_id)
            return live
    live = _load(corpus_id, sequence, revision)
    with _live_lock:
        _LIVE[corpus_id] = live
        while len(_LIVE) > CORPORA_KEPT:
            _LIVE.popitem(last=False)
    return live


def corpus_index(corpus: Corpus | int, *, as_of: int | None = None, wait: bool = True) -> CorpusIndex:
    """The engine index of the corpus now, or as of memory sequence `as_of` (see the module).

    `wait`: when another thread is assembling the index at the newest sequence, wait for it
    (False: serve the index already held, at its own sequence)."""
    corpus_id = corpus if isinstance(corpus, int) else corpus.pk
    sequence, revision = Corpus.objects.filter(pk=corpus_id).values_list("sequence", "revision").get()
    live = _live(corpus_id, sequence, revision)
    if as_of is not None and as_of < sequence:
        return _past(live, as_of)
    if live.current.memory_sequence >= sequence:
        return live.current
    if not live.lock.acquire(blocking=wait):
        return live.current
    try:
        if live.current.memory_sequence >= sequence:
            return live.current
        index, delta = _now(live)
        live.current = index
        if delta >= merge_at() and live.merging is None:
            _merged_stamps(live, index)
            live.merging = threading.Thread(target=_merge, args=(live, index), daemon=True, name="index-merge")
            live.merging.start()
        return index
    finally:
        live.lock.release()


def _past(live: _Live, as_of: int) -> CorpusIndex:
    with live.lock:
        index = live.past.get(as_of)
        if index is not None:
            live.past.move_to_end(as_of)
            return index
        index = _as_of(live, as_of)
        live.past[as_of] = index
        while len(live.past) > AS_OF_KEPT:
            live.past.popitem(last=False)
        return index


def rebuilt_index(corpus_id: int, *, as_of: int | None = None) -> CorpusIndex:
    """An index of the corpus's units as of `as_of` (None: now) rebuilt from rows, bypassing every
    cache: what base + delta must equal (the tests' and the bench's equivalence check)."""
    hnsw = dense_mode() == "pgvector-hnsw"
    index, _ = _build(corpus_id, as_of, hnsw=hnsw)
    return _attach(index, corpus_id, hnsw)


def forget(corpus_id: int | None = None) -> None:
    """Drop this process's live indexes of the corpus (None: of every corpus)."""
    with _live_lock:
        if corpus_id is None:
            _LIVE.clear()
        else:
            _LIVE.pop(corpus_id, None)


def held(corpus_id: int) -> _Live | None:
    """This process's live state of the corpus (tests, the bench)."""
    with _live_lock:
        return _LIVE.get(corpus_id)
