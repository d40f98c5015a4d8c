"""Memory as of a sequence: the engine units of a corpus as they stood at memory sequence N.

Memory at N is, for every unit whose `created_sequence` is at most N, its state after its latest
change at or below N (`MemoryChange.state`), kept when that state is active (a candidate or a
declined unit is never selected). A unit whose row has not changed since N (`sequence <= N`) is
read from its row; only the units changed since are read from their change rows, so memory as of a
recent sequence costs a query over the few units changed after it.

An erased unit stays erased at every sequence: erasure removes text, not the fact that a unit
existed, so a unit whose row is erased now is read with its row's erased text, title and vector
whatever its state at N held. Vectors are the rows' (a unit's text never changes but by erasure).

`units_changed(corpus, since, as_of)` is what an index at `since` needs to become the index at
`as_of` (selection.memory.live_index): the ids of every unit whose row changed after the lower
of the two, and those units' state at `as_of`.
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.db import connection, transaction
from django.db.models.expressions import RawSQL

from selection.engine.types import OpenLoop, Unit
from selection.models import Corpus, MemoryChange, MemoryUnit, Project, UnitLink, UnitStatus

ERASED = "x-erased"  # the extras key selection.memory.erasure marks an erased unit with
UNIT_ROW_FIELDS = (
    "id",
    "uid",
    "project_id",
    "evidence_class",
    "text",
    "title",
    "created_at",
    "valid_from",
    "valid_to",
    "open_loop_status",
    "open_loop_kind",
    "paths",
    "subject",
    "facet",
    "root",
)
_ROW = (*UNIT_ROW_FIELDS, "status", "sequence", "created_sequence", "extras")
_DATES = ("created_at", "valid_from", "valid_to")


@dataclass(frozen=True)
class Changed:
    """Units changed after a sequence: `ids` every such unit id (active at `as_of` or not),
    `units` those active at `as_of` with `vectors` aligned (None: some unit has no vector, or
    vectors were not asked for), and each such row's (row id, xmin) in `stamps`."""

    ids: tuple[str, ...]
    units: tuple[Unit, ...]
    vectors: np.ndarray | None
    stamps: dict[int, int]
    created: dict[str, int]  # created_sequence of each unit in `units`
    sequence: int  # the corpus's sequence in the snapshot the rows were read in


def unit_from_fields(values: dict, project: str, links: dict[str, list[str]]) -> Unit:
    """The engine Unit of a row's (or a change state's) fields (selection.memory.store reads rows by it)."""
    status, kind = values["open_loop_status"], values["open_loop_kind"]
    return Unit(
        id=values["uid"],
        project=project,
        evidence_class=values["evidence_class"],
        text=values["text"],
        title=values["title"],
        created_at=values["created_at"],
        valid_from=values["valid_from"],
        valid_to=values["valid_to"],
        supersedes=tuple(links.get("supersedes", ())),
        echo_of=(links.get("echo_of") or [None])[0],
        supports=tuple(links.get("supports", ())),
        refutes=tuple(links.get("refutes", ())),
        open_loop=OpenLoop(status=status, kind=kind) if status else None,
        paths=tuple(values["paths"] or ()),
        subject=values["subject"] or None,
        facet=values["facet"] or None,
        root=values["root"],
    )


def _state_fields(state: dict) -> dict:
    """A MemoryChange.state (the units.jsonl fields) as the row fields unit_from_fields reads."""
    values = {
        "uid": state["id"],
        "evidence_class": state["class"],
        "text": state.get("text") or "",
        "title": state.get("title") or "",
        "open_loop_status": state.get("open_loop_status") or "",
        "open_loop_kind": state.get("open_loop_kind") or "",
        "paths": state.get("paths") or [],
        "subject": state.get("subject") or "",
        "facet": state.get("facet") or "",
        "root": state.get("root") or "",
    }
    for name in _DATES:
        value = state.get(name)
        values[name] = datetime.fromisoformat(value) if value else None
    return values


def _links(row_ids: list[int]) -> dict[int, dict[str, list[str]]]:
    links: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for source_id, kind, target in (
        UnitLink.objects.filter(source_id__in=row_ids)
        .order_by("source_id", "kind", "position")
        .values_list("source_id", "kind", "target__uid")
    ):
        links[source_id][kind].append(target)
    return links


def _states(corpus_id: int, row_ids: list[int], as_of: int) -> dict[int, dict]:
    """Each unit's state after its latest change at or below `as_of` (units without one: absent)."""
    if not row_ids:
        return {}
    rows = (
        MemoryChange.objects.filter(corpus_id=corpus_id, unit_id__in=row_ids, sequence__lte=as_of)
        .order_by("unit_id", "-sequence")
        .distinct("unit_id")
        .values_list("unit_id", "state")
    )
    return dict(rows)


def units_changed(corpus_id: int, *, since: int, as_of: int | None, with_vectors: bool = True) -> Changed:
    """The units whose rows changed after min(since, as_of) (`as_of` None: now), each as of
    `as_of` (see the module)."""
    low = since if as_of is None else min(since, as_of)
    with _snapshot():
        rows = MemoryUnit.objects.filter(corpus_id=corpus_id, sequence__gt=low)
        return _materialise(corpus_id, rows, as_of, with_vectors)


def units_as_of(corpus_id: int, as_of: int | None, *, with_vectors: bool = True) -> Changed:
    """Every unit of the corpus as of `as_of` (None: now), read afresh (a rebuild's input)."""
    with _snapshot():
        return _materialise(corpus_id, MemoryUnit.objects.filter(corpus_id=corpus_id), as_of, with_vectors)


def row_stamps(corpus_id: int, *, upto: int) -> list[tuple[int, int]]:
    """(row id, xmin) of every unit row of the corpus whose sequence is at most `upto`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, xmin::text::bigint FROM selection_memoryunit WHERE corpus_id = %s AND sequence <= %s",
            [corpus_id, upto],
        )
        return cursor.fetchall()


@contextmanager
def _snapshot():
    """One snapshot for every query inside: REPEATABLE READ when no transaction is open (inside
    one, its own snapshot rules)."""
    if transaction.get_connection().in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


def _materialise(corpus_id: int, rows, as_of: int | None, with_vectors: bool) -> Changed:
    sequence = Corpus.objects.filter(pk=corpus_id).values_list("sequence", flat=True).get()
    if as_of is not None:
        as_of = min(as_of, sequence)
    slugs = dict(Project.objects.filter(corpus_id=corpus_id).values_list("id", "slug"))
    fields = _ROW + (("embedding",) if with_vectors else ())
    # xmin: the transaction that last wrote the row (a base index checks its rows by it)
    xmin = RawSQL("selection_memoryunit.xmin::text::bigint", ())
    values = list(rows.annotate(row_xmin=xmin).order_by("uid").values(*fields, "row_xmin"))
    ids = tuple(v["uid"] for v in values)
    later = [v["id"] for v in values if as_of is not None and v["sequence"] > as_of]
    states = _states(corpus_id, later, as_of) if later else {}
    later_set = set(later)
    current = [v["id"] for v in values if v["id"] not in later_set]
    links = _links(current)
    units: list[Unit] = []
    created: dict[str, int] = {}
    vectors: list[np.ndarray] = []
    missing = False
    for v in values:
        if v["id"] in later_set:
            if v["created_sequence"] > as_of:
                continue  # written after `as_of`
            state = states.get(v["id"])
            if state is None or state.get("status", UnitStatus.ACTIVE) != UnitStatus.ACTIVE:
                continue
            fields_at = _state_fields(state)
            if (v["extras"] or {}).get(ERASED):  # erased since: the erased text, never the old
                fields_at["text"], fields_at["title"] = v["text"], v["title"]
            unit_links: dict[str, list[str]] = defaultdict(list)
            for kind, target in state.get("links") or ():
                unit_links[kind].append(target)
            unit = unit_from_fields(fields_at, state["project"], unit_links)
        else:
            if v["status"] != UnitStatus.ACTIVE:
                continue
            unit = unit_from_fields(v, slugs[v["project_id"]], links.get(v["id"], {}))
        units.append(unit)
        created[unit.id] = v["created_sequence"]
        if with_vectors:
            if v["embedding"] is None:
                missing = True
            else:
                vectors.append(np.asarray(v["embedding"], dtype=np.float32))
    matrix = None
    if with_vectors and not missing:
        matrix = np.vstack(vectors) if vectors else None
    stamps = {v["id"]: v["row_xmin"] for v in values}
    return Changed(ids=ids, units=tuple(units), vectors=matrix, stamps=stamps, created=created, sequence=sequence)
