"""Erasure: one unit's text removed from everywhere it is stored, on a lead's request, leaving a mark.

`unit_erase` replaces the unit's text with "[erased by <user> at <time>: <reason>]", clears its
title, re-embeds the mark (the old vector was derived from the text), and rewrites every trace that
carries the text or names the unit's title: the bundle item it heads (text and rendered form) and
supersession notes (in the bundle and in the trace's coalescing steps, where the title becomes the
unit id). Each rewritten trace gets a tombstone through selection.traces.chain.trace_tombstone, so its
digest and chain link stay verifiable; exports and pages read the rewritten rows, so the text is
gone from them too. Memory's history keeps the unit, not its text: the erasure is an `erased`
MemoryChange, and every earlier change's state of the unit carries the mark in place of its text
and no title. One transaction, one audit row (`unit.erased`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection, transaction
from django.utils import timezone

from authority import access
from authority.audit import audit_record
from selection.engine.reason_codes import CoalescingKind
from selection.engine.render import render_item
from selection.engine.types import estimate_tokens
from selection.memory import embeddings, store
from selection.memory.changes import memory_changes_append
from selection.memory.writes.records import memory_rewritten
from selection.models import MemoryChangeKind, MemoryUnit, TombstoneKind, Trace, TraceCandidate
from selection.traces.chain import trace_tombstone

# kept in the unit's extras, so an export (and a re-import) carries who erased it, when and why
ERASED_KEY = "x-erased"
ERASED_MARK = "[erased by {user} at {time}: {reason}]"
MAX_REASON = 500
_SUPERSEDED = ", superseded by "


class ErasureRefused(ValueError):
    """No reason given, or the unit was erased already: nothing changed."""


@dataclass(frozen=True)
class Erasure:
    unit: str
    mark: str
    traces: tuple[int, ...]  # the traces rewritten (each with a tombstone)


def erasure_mark(*, user, at: datetime, reason: str) -> str:
    time = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return ERASED_MARK.format(user=getattr(user, "username", None) or "system", time=time, reason=reason)


def _renamed_note(note: str, op: dict, uid: str, title: str) -> str:
    """A supersession note ("<old label>, superseded by <new label>") naming `uid` by id, not title."""
    if not title:
        return note  # a unit without a title was named by its id already
    if op.get("unit_id") == uid and note.startswith(title + _SUPERSEDED):
        note = uid + note[len(title) :]
    if op.get("target_id") == uid and note.endswith(_SUPERSEDED + title):
        note = note[: -len(title)] + uid
    return note


def erased_payload(bundle: dict, header: dict, *, uid: str, title: str, mark: str) -> tuple[dict, dict]:
    """A stored trace's bundle and header (their JSON forms) with `uid`'s text and title removed."""
    renamed: dict[tuple[str, str], str] = {}
    coalescing = []
    for op in header.get("coalescing") or []:
        if op.get("op") == CoalescingKind.SUPERSESSION_NOTE.value:
            note = _renamed_note(op.get("note", ""), op, uid, title)
            if note != op.get("note"):
                renamed[(op["item_id"], op["note"])] = note
                op = {**op, "note": note}
        coalescing.append(op)
    items = []
    for item in bundle.get("items") or []:
        notes = [renamed.get((item["item_id"], n), n) for n in item.get("notes") or []]
        if item["sources"] and item["sources"][0] == uid:
            rendered = render_item(
                sources=item["sources"],
                evidence_class=item["evidence_class"],
                title="",
                text=mark,
                contradicts=item.get("contradicts") or (),
                notes=notes,
            )
            item = {**item, "text": mark, "notes": notes, "rendered": rendered}
        elif notes != (item.get("notes") or []):
            rendered = item.get("rendered", "")
            for old, new in zip(item["notes"], notes, strict=True):
                rendered = rendered.replace(f"History: {old}\n", f"History: {new}\n")
            item = {**item, "notes": notes, "rendered": rendered}
        items.append(item)
    new_bundle = (
        {**bundle, "items": items, "rendered": "".join(i.get("rendered", "") for i in items)} if bundle else bundle
    )
    new_header = {**header, "coalescing": coalescing} if "coalescing" in header else header
    return new_bundle, new_header


def history_scrubbed(unit: MemoryUnit, *, mark: str, before: int) -> int:
    """Earlier MemoryChange states of `unit` (below sequence `before`) with the mark for text and no
    title: the unit's existence, links and validity stay in memory's history, its text does not."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE selection_memorychange
               SET state = state || jsonb_build_object('text', %s::text, 'title', '')
             WHERE unit_id = %s AND sequence < %s
            """,
            [mark, unit.pk, before],
        )
        return cursor.rowcount


def unit_erase(*, unit: MemoryUnit, lead, reason: str, now: datetime | None = None, via: str = "page") -> Erasure:
    """Erase `unit`'s text and title from the unit row and every trace of its corpus (a lead only)."""
    access.access_erase(lead, unit.project)
    reason = " ".join((reason or "").split())
    if not reason:
        raise ErasureRefused("an erasure needs a reason (it is shown in the mark and the audit log)")
    if len(reason) > MAX_REASON:
        raise ErasureRefused(f"the reason is {len(reason)} characters; at most {MAX_REASON}")
    if unit.extras.get(ERASED_KEY):
        raise ErasureRefused(f"{unit.uid} was erased already ({unit.extras[ERASED_KEY].get('at')})")
    now = now or timezone.now()
    mark = erasure_mark(user=lead, at=now, reason=reason)
    # the model runs before the transaction: its vector replaces one derived from the erased text
    vector = embeddings.embed_texts([mark])[0] if unit.embedding is not None else None
    rewritten: list[int] = []
    with transaction.atomic():
        unit = MemoryUnit.objects.select_for_update().select_related("project").get(pk=unit.pk)
        if unit.extras.get(ERASED_KEY):
            raise ErasureRefused(f"{unit.uid} was erased already ({unit.extras[ERASED_KEY].get('at')})")
        title = unit.title
        unit.text, unit.title, unit.tokens, unit.embedding = mark, "", estimate_tokens(mark), vector
        unit.extras = {**unit.extras, ERASED_KEY: {"by": lead.username, "at": now.isoformat(), "reason": reason}}
        unit.save(update_fields=["text", "title", "tokens", "embedding", "extras"])
        erased = memory_changes_append(unit.corpus_id, [(unit.pk, MemoryChangeKind.ERASED)], actor=lead, via=via)
        history_scrubbed(unit, mark=mark, before=erased.start)
        memory_rewritten(unit.corpus_id)
        carrying = (
            TraceCandidate.objects.filter(unit_uid=unit.uid, trace__project__corpus_id=unit.corpus_id)
            .values_list("trace_id", flat=True)
            .distinct()
        )
        for trace in (
            Trace.objects.filter(pk__in=carrying, expired_at__isnull=True).only("id", "bundle", "header").order_by("id")
        ):
            bundle, header = erased_payload(trace.bundle, trace.header, uid=unit.uid, title=title, mark=mark)
            if bundle == trace.bundle and header == trace.header:
                continue
            trace_tombstone(
                trace.pk,
                kind=TombstoneKind.ERASED,
                changes={"bundle": bundle, "header": header},
                actor=lead,
                reason=reason,
                unit_uid=unit.uid,
            )
            rewritten.append(trace.pk)
        audit_record(
            actor=lead,
            project=unit.project,
            action="unit.erased",
            obj=unit,
            summary=f"{unit.uid} erased from the unit and {len(rewritten)} trace(s): {reason}",
            payload={
                "unit": unit.uid,
                "corpus": unit.corpus_id,
                "traces": rewritten,
                "reason": reason,
                "sequence": erased.start,
            },
        )
    store.forget_index(unit.corpus_id, files=True)
    return Erasure(unit=unit.uid, mark=mark, traces=tuple(rewritten))
