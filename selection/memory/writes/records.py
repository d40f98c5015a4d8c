"""What the write services share: a unit as its units.jsonl object, a write's answer, and the one
call that tells the serving index memory changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F

from selection.memory import store
from selection.models import Corpus, LinkKind, MemoryChange, MemoryUnit, UnitLink

VIAS = ("api", "mcp", "page", "command")


@dataclass(frozen=True)
class MemoryWrite:
    """A write's answer: `document` is what every surface returns (and what an idempotent retry
    gets back unchanged); `replayed` says it is the stored answer of an earlier request."""

    document: dict[str, Any]
    replayed: bool = False
    units: tuple[str, ...] = field(default=())

    @property
    def unit(self) -> str:
        return self.document["unit"]


def memory_rewritten(corpus_id: int) -> None:
    """An erasure rewrote text that every process's base index holds, inside its transaction: the
    corpus's revision moves (each process compares it on its next selection and rebuilds) and this
    process drops its index once the erasure commits. A write needs no call: the corpus sequence
    it raises is what every process tails (selection.memory.live_index)."""
    Corpus.objects.filter(pk=corpus_id).update(revision=F("revision") + 1)
    transaction.on_commit(lambda: store.forget_index(corpus_id))


def unit_links_of(unit_ids: list[int]) -> dict[int, dict[str, list[str]]]:
    """Outgoing links of some units by row id: kind -> target ids in their listed order."""
    links: dict[int, dict[str, list[str]]] = {pk: {} for pk in unit_ids}
    rows = (
        UnitLink.objects.filter(source_id__in=unit_ids)
        .order_by("source_id", "kind", "position")
        .values_list("source_id", "kind", "target__uid")
    )
    for source, kind, target in rows:
        links[source].setdefault(kind, []).append(target)
    return links


def _time(value) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def unit_record(unit: MemoryUnit, links: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The unit as its units.jsonl object (what the corpus reader checks and an export writes)."""
    if links is None:
        links = unit_links_of([unit.pk])[unit.pk]
    record: dict[str, Any] = {
        "id": unit.uid,
        "project": unit.project.slug,
        "class": unit.evidence_class,
        "text": unit.text,
    }
    if unit.title:
        record["title"] = unit.title
    for key in ("created_at", "valid_from", "valid_to"):
        if getattr(unit, key) is not None:
            record[key] = _time(getattr(unit, key))
    for kind in (LinkKind.SUPERSEDES, LinkKind.SUPPORTS, LinkKind.REFUTES):
        if links.get(kind.value):
            record[kind.value] = list(links[kind.value])
    if links.get(LinkKind.ECHO_OF.value):
        record["echo_of"] = links[LinkKind.ECHO_OF.value][0]
    if unit.open_loop_status:
        record["open_loop"] = {"status": unit.open_loop_status, "kind": unit.open_loop_kind}
    if unit.paths:
        record["paths"] = list(unit.paths)
    for key in ("subject", "facet"):
        if getattr(unit, key):
            record[key] = getattr(unit, key)
    if unit.root:
        record["root"] = True
    record.update({k: v for k, v in unit.extras.items() if k.startswith("x-")})
    return record


def unit_document(unit: MemoryUnit) -> dict[str, Any]:
    """A unit as the API, the MCP `recall_unit` tool and the command show it: its record, status,
    sequences and the changes that made it (kind, sequence, when, by whom, through what)."""
    changes = [
        {
            "sequence": c.sequence,
            "kind": c.kind,
            "recorded_at": _time(c.recorded_at),
            "actor": c.actor.username if c.actor_id else None,
            "via": c.via,
        }
        for c in MemoryChange.objects.filter(unit=unit).select_related("actor").order_by("sequence")
    ]
    successors = list(
        UnitLink.objects.filter(target=unit, kind=LinkKind.SUPERSEDES)
        .order_by("source__uid")
        .values_list("source__uid", flat=True)
    )
    return {
        "unit": unit.uid,
        "project": unit.project.slug,
        "status": unit.status,
        "record": unit_record(unit),
        "superseded_by": successors,
        "created_sequence": unit.created_sequence,
        "sequence": unit.sequence,
        "recorded_at": _time(unit.recorded_at),
        "changes": changes,
    }


def supersession_close(row: MemoryUnit, *, now: datetime) -> list[MemoryUnit]:
    """Close the validity of the units `row` supersedes at `row`'s start (valid_from, else
    created_at, else now) where it is open or ends later; returns the units changed."""
    start = row.valid_from or row.created_at or now
    closed = []
    for target in MemoryUnit.objects.filter(links_in__source=row, links_in__kind=LinkKind.SUPERSEDES).order_by("uid"):
        if target.valid_to is None or target.valid_to > start:
            target.valid_to = start
            target.save(update_fields=["valid_to"])
            closed.append(target)
    return closed
