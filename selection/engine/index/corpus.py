"""CorpusIndex: built once per corpus; per-query work stays proportional to the pool, except the two
scans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from ..types import Unit
from .bm25 import BM25Index, EncodedDocs
from .dense import DenseSearcher, NumpyExactSearcher
from .ivf import IvfSearcher
from .tokens import tokenise
from .units import UnitTable

IVF_THRESHOLD = 50_000  # CorpusIndex.build picks IvfSearcher from this many vectors up


def dense_searcher(
    vectors: np.ndarray,
    *,
    threshold: int | None = IVF_THRESHOLD,
    centroids: np.ndarray | None = None,
    normalised: bool = False,
) -> DenseSearcher:
    """Exact below `threshold` vectors, IvfSearcher from there on (None: always exact); the IVF
    trains its lists on the vectors unless `centroids` are given. `normalised`: the rows are
    row-normalised already (normalise_rows's output), and are kept as they are."""
    if threshold is not None and vectors.shape[0] >= threshold:
        return IvfSearcher(vectors, centroids=centroids, normalised=normalised)
    return NumpyExactSearcher(vectors, normalised=normalised)


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

    Pickled (selection/memory/index_cache.py), the units become a UnitTable: columns, each Unit made when
    first read, so a fresh process neither unpickles nor holds a million of them; `position` is
    then the table's binary search over its sorted ids.
    """

    def __init__(
        self,
        units: Sequence[Unit],
        *,
        dense: DenseSearcher | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        encoded: EncodedDocs | None = None,
    ):
        ids = [u.id for u in units]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate unit ids")
        if list(ids) != sorted(ids):
            raise ValueError("CorpusIndex needs units sorted by id; use CorpusIndex.build")
        self.units: tuple[Unit, ...] = tuple(units)
        self.position: dict[str, int] = {u.id: i for i, u in enumerate(self.units)}
        # term ids straight from each text's tokens: a million units' token lists never live at once
        # (`encoded`: the same, assembled from another index's tokens: selection.engine.index.assembly)
        if encoded is None:
            encoded = EncodedDocs(tokenise(u.text) for u in self.units)
        elif encoded.size != len(self.units):
            raise ValueError("encoded documents do not cover the units")
        self.bm25 = BM25Index((), k1=k1, b=b, epsilon=epsilon, encoded=encoded)
        # distinct term ids per unit (CSR), for overlap and redundancy without per-unit sets; int32
        # ids hold half the memory of int64 (a million units carry ~40 million)
        self.term_offsets, self.terms = encoded.distinct_terms()
        # every unit's tokens as term ids, end to end (lengths: bm25.doc_len): what an index of a
        # changed unit set is assembled from without tokenising the units it keeps
        self.token_stream: np.ndarray = encoded.tokens
        del encoded
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
        self._scope_masks: dict[tuple[str, ...], np.ndarray] = {}
        self._scope_rows: dict[tuple[str, ...], np.ndarray] = {}
        open_by: dict[str, list[int]] = {}
        for pos, u in enumerate(self.units):
            if u.is_open_loop:
                open_by.setdefault(u.project, []).append(pos)
        # each project's open loops, in id order (the C5 open-loop pull)
        self.open_loops: dict[str, tuple[int, ...]] = {k: tuple(v) for k, v in open_by.items()}
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

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if not isinstance(self.units, UnitTable):
            state["units"] = UnitTable(self.units)
        state["position"] = None  # the table's own id -> position
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.position = self.units.index

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
        centroids: np.ndarray | None = None,
    ) -> CorpusIndex:
        """Index `units`; `vectors` is an optional (N, d) array aligned with `units` as given.

        From `dense_threshold` vectors on, dense search is approximate (IvfSearcher); None keeps
        it exact at any size; `centroids` are the IVF's lists (trained on the vectors when None).
        The trace's retriever config names the searcher either way.
        """
        order = sorted(range(len(units)), key=lambda i: units[i].id)
        ordered = [units[i] for i in order]
        if vectors is not None:
            if dense is not None:
                raise ValueError("pass vectors or a dense searcher, not both")
            array = np.asarray(vectors)
            if array.ndim != 2 or array.shape[0] != len(units):
                raise ValueError(f"vectors must be ({len(units)}, d), got {array.shape}")
            # units usually arrive in id order: then no permuted copy (1.5 GB at a million)
            ordered_already = all(i == j for i, j in enumerate(order))
            dense = dense_searcher(
                array if ordered_already else array[np.asarray(order, dtype=np.int64)],
                threshold=dense_threshold,
                centroids=centroids,
            )
        return cls(ordered, dense=dense, k1=k1, b=b, epsilon=epsilon)

    def __len__(self) -> int:
        return len(self.units)

    def scope_mask(self, scope: frozenset[str]) -> np.ndarray:
        """Boolean mask over positions: the units whose project is in `scope` (cached per scope)."""
        key = tuple(sorted(scope))
        mask = self._scope_masks.get(key)
        if mask is None:
            if isinstance(self.units, UnitTable):  # the project codes, no unit made
                table = self.units
                wanted = [code for code, name in enumerate(table.projects) if name in key]
                mask = np.isin(table.project_codes, wanted)
            else:
                projects = np.asarray([u.project for u in self.units], dtype=object)
                mask = np.isin(projects, list(key)) if len(projects) else np.zeros(0, dtype=bool)
            self._scope_masks[key] = mask
        return mask

    def scope_rows(self, scope: frozenset[str]) -> np.ndarray:
        """The positions of `scope_mask(scope)`, ascending (cached per scope)."""
        key = tuple(sorted(scope))
        rows = self._scope_rows.get(key)
        if rows is None:
            rows = np.flatnonzero(self.scope_mask(scope))
            self._scope_rows[key] = rows
        return rows

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
