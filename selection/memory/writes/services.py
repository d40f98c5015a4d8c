"""Memory writes, one service each: create, supersede, refute, echo, support, close and reopen a loop.

Every surface (API, MCP, the command, the Memory pages) calls these. Each write:

1. checks access (authority.access.access_write_memory: a lead of the project, or its agent token);
2. computes the new unit's vector with the import's embedder, before the transaction;
3. in one transaction, under a lock of the corpus row: checks the unit as the corpus reader checks
   a line (validation.unit_checked), finds structural conflicts, writes the unit and link rows
   through the import's own COPY writers, appends the MemoryChange rows
   (changes.memory_changes_append), writes the audit row; every serving process sees the raised
   corpus sequence on its next selection and applies the change to its index (live_index);
4. with an idempotency key, stores its answer: the same key and request again gets that answer,
   the same key with another request is refused (WriteConflict, 409).

How a unit lands is the frame's `memory.admission` (admission.py): `direct`, active at once;
`candidate`, a write through an agent token waits in the "To admit" queue, never selected.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.db.models import Max
from django.utils import timezone

from authority import access
from authority.audit import audit_record
from selection.corpus import UnitRecord
from selection.memory import embeddings
from selection.memory.changes import memory_changes_append
from selection.memory.generated import links_copy, unit_copy_row, units_copy
from selection.memory.importing import OPEN_LOOP_EXTRAS
from selection.memory.writes.admission import landing_status, project_snapshot
from selection.memory.writes.conflicts import structural_conflicts
from selection.memory.writes.idempotency import WriteRequest, write_once
from selection.memory.writes.records import (
    MemoryWrite,
    supersession_close,
    unit_links_of,
    unit_record,
)
from selection.memory.writes.validation import WriteConflict, WriteRefused, unit_checked
from selection.models import (
    Corpus,
    LinkKind,
    MemoryChangeKind,
    MemoryUnit,
    OpenLoopStatus,
    Project,
    UnitLink,
    UnitStatus,
)

MAX_ECHO_CHAIN = 1000


def _now_text(now: datetime) -> str:
    return now.isoformat().replace("+00:00", "Z")


def _vector(project: Project, text: Any):
    """The unit's vector from the import's embedder, when the corpus's units carry vectors."""
    corpus = Corpus.objects.only("embedding_model").get(pk=project.corpus_id)
    if not corpus.embedding_model or not isinstance(text, str) or not text.strip():
        return None
    return embeddings.embed_texts([text])[0]


def _record_of(project: Project, fields: dict[str, Any], *, now: datetime) -> dict[str, Any]:
    """The units.jsonl object a write sends: its fields, the project, a fresh id when it names
    none, and `created_at` the time of the write when it gives none."""
    if not isinstance(fields, dict):
        raise WriteRefused("a unit is a JSON object of units.jsonl fields", field=("unit",))
    if "project" in fields and fields["project"] != project.slug:
        raise WriteRefused(f"project: this unit is written in {project.slug}", field=("project",))
    record = {k: v for k, v in fields.items() if v is not None or k in ("valid_from", "valid_to")}
    record["project"] = project.slug
    if "id" not in record:
        record["id"] = f"{project.slug}-{secrets.token_hex(5)}"
    record.setdefault("created_at", _now_text(now))
    return record


def _write_unit(
    *, request: WriteRequest, checked: UnitRecord, status: str, vector, now: datetime
) -> tuple[MemoryUnit, list[MemoryUnit]]:
    """The unit row and its links, written by the import's COPY writers; then, for an active unit,
    the validity of the units it supersedes closed at its start. Returns the unit and those."""
    project, unit = request.project, checked.unit
    position = (MemoryUnit.objects.filter(corpus_id=project.corpus_id).aggregate(last=Max("position"))["last"] or 0) + 1
    extras = dict(checked.extras)
    if checked.open_loop_extras:
        extras[OPEN_LOOP_EXTRAS] = checked.open_loop_extras
    units_copy([unit_copy_row(project.corpus_id, project.pk, unit, position, vector, extras)])
    targets = {*unit.supersedes, *unit.supports, *unit.refutes, *((unit.echo_of,) if unit.echo_of else ())}
    ids = dict(
        MemoryUnit.objects.filter(corpus_id=project.corpus_id, uid__in=[unit.id, *targets]).values_list("uid", "id")
    )
    links_copy([unit], ids)
    row = MemoryUnit.objects.select_related("project").get(pk=ids[unit.id])
    if status != UnitStatus.ACTIVE:
        MemoryUnit.objects.filter(pk=row.pk).update(status=status)
        row.status = status
        return row, []
    return row, supersession_close(row, now=now)


def _created(
    *,
    request: WriteRequest,
    fields: dict[str, Any],
    links: dict[str, list[str]] | None = None,
    supersede: bool = False,
) -> MemoryWrite:
    """The shared path of every write that creates a unit (create, supersede, refute, echo, support)."""
    project = request.project
    caps = access.access_write_memory(request.actor, project)
    now = timezone.now()
    record = _record_of(project, fields, now=now)
    for kind, targets in (links or {}).items():
        if kind == LinkKind.ECHO_OF.value:
            record[kind] = targets[0]
        else:
            listed = record.get(kind) if isinstance(record.get(kind), list) else []
            record[kind] = [*targets, *[t for t in listed if t not in targets]]
    if supersede:
        record.setdefault("valid_from", _now_text(now))
    vector = _vector(project, record.get("text"))

    def apply() -> dict[str, Any]:
        snapshot = project_snapshot(project)
        status = landing_status(caps, snapshot)
        checked = unit_checked(record, project=project, snapshot=snapshot, new=True)
        unit = checked.unit
        _starts_after(unit, project)
        conflicts = structural_conflicts(
            project=project, subject=unit.subject, facet=unit.facet, exclude={unit.id, *unit.supersedes}
        )
        if conflicts and status == UnitStatus.ACTIVE:
            other = conflicts[0]
            raise WriteConflict(
                f'subject: "{unit.subject}" / "{unit.facet}" is already held by {other.uid} ("{other.title}"); '
                f"supersede {other.uid} instead, or give this unit another subject or facet"
            )
        row, closed = _write_unit(request=request, checked=checked, status=status, vector=vector, now=now)
        changes = [(row.pk, MemoryChangeKind.CREATED)] + [(t.pk, MemoryChangeKind.CHANGED) for t in closed]
        sequences = memory_changes_append(
            project.corpus_id, changes, actor=request.actor, via=request.via, batch=request.key or ""
        )
        document = {
            "action": request.action,
            "unit": row.uid,
            "project": project.slug,
            "status": row.status,
            "sequence": sequences[0],
            "sequences": list(sequences),
            "links": {k: v for k, v in unit_links_of([row.pk])[row.pk].items()},
            "closed": [t.uid for t in closed],
            "conflicts": [c.uid for c in conflicts],
        }
        landed = "a candidate" if row.status == UnitStatus.CANDIDATE else "active"
        audit_record(
            actor=request.actor,
            project=project,
            action=request.action,
            obj=row,
            summary=f"{row.uid} ({row.evidence_class}) written {landed} via {request.via}"
            + (f", superseding {', '.join(unit.supersedes)}" if unit.supersedes else ""),
            payload={**document, "via": request.via},
        )
        return document

    return write_once(request, apply)


def _starts_after(unit, project: Project) -> None:
    """A successor starts no earlier than the units it supersedes (their validity closes there)."""
    start = unit.valid_from or unit.created_at
    if not unit.supersedes or start is None:
        return
    for target in MemoryUnit.objects.filter(corpus_id=project.corpus_id, uid__in=unit.supersedes).order_by("uid"):
        began = target.valid_from or target.created_at
        if began is not None and began > start:
            raise WriteRefused(
                f"valid_from: {unit.id} would start ({start.isoformat()}) before {target.uid} does "
                f"({began.isoformat()}), whose validity closes where it starts",
                field=("valid_from",),
            )


def _request(action: str, *, actor, project: Project, via: str, key: str | None, body: dict) -> WriteRequest:
    return WriteRequest(action=action, actor=actor, project=project, via=via, key=key, body=body)


def unit_create(*, actor, project: Project, fields: dict, via: str, idempotency_key: str | None = None) -> MemoryWrite:
    """Write one new unit (units.jsonl fields; `id` and `created_at` filled in when absent)."""
    request = _request("unit.created", actor=actor, project=project, via=via, key=idempotency_key, body=fields)
    return _created(request=request, fields=fields)


def unit_supersede(
    *, actor, project: Project, targets: list[str], fields: dict, via: str, idempotency_key: str | None = None
) -> MemoryWrite:
    """Write a new unit superseding `targets`: their validity closes at its `valid_from` (the time
    of the write when it gives none) once it is active."""
    body = {"targets": list(targets), "unit": fields}
    request = _request("unit.superseded", actor=actor, project=project, via=via, key=idempotency_key, body=body)
    if not targets:
        raise WriteRefused("supersedes: name at least one unit to supersede", field=("supersedes",))
    return _created(request=request, fields=fields, links={LinkKind.SUPERSEDES.value: list(targets)}, supersede=True)


def _linked(
    action: str,
    kind: LinkKind,
    *,
    actor,
    project: Project,
    target: str,
    fields: dict | None,
    source: str | None,
    via: str,
    idempotency_key: str | None,
) -> MemoryWrite:
    """refute / echo / support: a new unit (`fields`) linking to `target`, or a link added from an
    existing unit `source` of the project to it."""
    body = {"target": target, "unit": fields, "source": source}
    request = _request(action, actor=actor, project=project, via=via, key=idempotency_key, body=body)
    access.access_write_memory(actor, project)
    if (fields is None) == (source is None):
        raise WriteRefused(f"send either a new unit or the `source` unit that {kind.value} {target}", field=("unit",))
    if fields is not None:
        return _created(request=request, fields=fields, links={kind.value: [target]})
    return _link_added(request, kind, source=source, target=target)


def _link_added(request: WriteRequest, kind: LinkKind, *, source: str, target: str) -> MemoryWrite:
    project = request.project
    caps = access.access_write_memory(request.actor, project)

    def apply() -> dict[str, Any]:
        snapshot = project_snapshot(project)
        if landing_status(caps, snapshot) != UnitStatus.ACTIVE:
            raise WriteConflict(
                f"{project.slug} admits an agent's memory as candidates: write a new unit that {kind.value} "
                f"{target} (it waits for review) instead of changing {source}"
            )
        row = _active_unit(project, source, field="source")
        record = unit_record(row)
        if kind == LinkKind.ECHO_OF:
            if "echo_of" in record:
                raise WriteConflict(f"{source} is an echo of {record['echo_of']} already")
            record["echo_of"] = target
        else:
            record[kind.value] = [*record.get(kind.value, []), target]
        unit_checked(record, project=project, snapshot=snapshot, new=False, chain=_echo_chain(project, target, source))
        if not MemoryUnit.objects.filter(corpus_id=project.corpus_id, uid=target, status=UnitStatus.ACTIVE).exists():
            raise WriteRefused(f'target: unit "{target}" does not exist', field=("target",))
        target_row = MemoryUnit.objects.get(corpus_id=project.corpus_id, uid=target)
        position = UnitLink.objects.filter(source=row, kind=kind).count()
        UnitLink.objects.create(source=row, target=target_row, kind=kind, position=position)
        sequences = memory_changes_append(
            project.corpus_id, [(row.pk, MemoryChangeKind.LINKED)], actor=request.actor, via=request.via,
            batch=request.key or "",
        )  # fmt: skip
        document = {
            "action": request.action,
            "unit": row.uid,
            "project": project.slug,
            "status": row.status,
            "sequence": sequences[0],
            "sequences": list(sequences),
            "links": unit_links_of([row.pk])[row.pk],
            "closed": [],
            "conflicts": [],
        }
        audit_record(
            actor=request.actor,
            project=project,
            action=request.action,
            obj=row,
            summary=f"{row.uid} {kind.value.replace('_', ' ')} {target} (via {request.via})",
            payload={**document, "via": request.via, "target": target},
        )
        return document

    return write_once(request, apply)


def _echo_chain(project: Project, start: str, source: str) -> list[dict[str, Any]]:
    """The units.jsonl objects along `start`'s echo_of chain up to `source` (checked apart): an
    echo link from `source` that closes a cycle shows."""
    chain, seen, current = [], {source}, start
    while current and current not in seen and len(chain) < MAX_ECHO_CHAIN:
        seen.add(current)
        row = MemoryUnit.objects.select_related("project").filter(corpus_id=project.corpus_id, uid=current).first()
        if row is None:
            break
        record = unit_record(row)
        chain.append(record)
        current = record.get("echo_of")
    return chain


def _active_unit(project: Project, uid: str, *, field: str) -> MemoryUnit:
    row = (
        MemoryUnit.objects.select_for_update(of=("self",))
        .select_related("project")
        .filter(project=project, uid=uid, status=UnitStatus.ACTIVE)
        .first()
    )
    if row is None:
        raise WriteRefused(f'{field}: {project.slug} holds no active unit "{uid}"', field=(field,))
    return row


def unit_refute(*, actor, project, target, fields=None, source=None, via, idempotency_key=None) -> MemoryWrite:
    """A new unit refuting `target` (or `source`, an existing unit, marked as refuting it)."""
    return _linked("unit.refuted", LinkKind.REFUTES, actor=actor, project=project, target=target, fields=fields,
                   source=source, via=via, idempotency_key=idempotency_key)  # fmt: skip


def unit_echo(*, actor, project, target, fields=None, source=None, via, idempotency_key=None) -> MemoryWrite:
    """A new unit restating `target` (or `source` marked as an echo of it): restatement is not
    corroboration, so an echo carries less evidence."""
    return _linked("unit.echoed", LinkKind.ECHO_OF, actor=actor, project=project, target=target, fields=fields,
                   source=source, via=via, idempotency_key=idempotency_key)  # fmt: skip


def unit_support(*, actor, project, target, fields=None, source=None, via, idempotency_key=None) -> MemoryWrite:
    """A new unit supporting `target` (or `source` marked as supporting it)."""
    return _linked("unit.supported", LinkKind.SUPPORTS, actor=actor, project=project, target=target, fields=fields,
                   source=source, via=via, idempotency_key=idempotency_key)  # fmt: skip


def _loop_set(action: str, status: str, *, actor, project: Project, uid: str, via: str, key: str | None) -> MemoryWrite:
    request = _request(action, actor=actor, project=project, via=via, key=key, body={"unit": uid})
    caps = access.access_write_memory(actor, project)

    def apply() -> dict[str, Any]:
        if landing_status(caps, project_snapshot(project)) != UnitStatus.ACTIVE:
            raise WriteConflict(
                f"{project.slug} admits an agent's memory as candidates: supersede {uid} with a unit whose "
                f"open loop is {status} (it waits for review)"
            )
        row = _active_unit(project, uid, field="unit")
        if not row.open_loop_status:
            raise WriteConflict(f"{uid} is no open loop")
        if row.open_loop_status == status:
            raise WriteConflict(f"the open loop {uid} is {status} already")
        row.open_loop_status = status
        row.save(update_fields=["open_loop_status"])
        sequences = memory_changes_append(
            project.corpus_id, [(row.pk, MemoryChangeKind.CHANGED)], actor=actor, via=via, batch=key or ""
        )
        document = {
            "action": action,
            "unit": row.uid,
            "project": project.slug,
            "status": row.status,
            "sequence": sequences[0],
            "sequences": list(sequences),
            "open_loop": {"status": status, "kind": row.open_loop_kind},
            "closed": [],
            "conflicts": [],
        }
        verb = "closed" if status == OpenLoopStatus.CLOSED else "reopened"
        audit_record(
            actor=actor, project=project, action=action, obj=row,
            summary=f"open loop {row.uid} {verb} (via {via})", payload={**document, "via": via},
        )  # fmt: skip
        return document

    return write_once(request, apply)


def loop_close(*, actor, project: Project, uid: str, via: str, idempotency_key: str | None = None) -> MemoryWrite:
    """Close the open loop `uid` (a todo done, a question answered, an expectation met)."""
    return _loop_set("loop.closed", OpenLoopStatus.CLOSED, actor=actor, project=project, uid=uid, via=via,
                     key=idempotency_key)  # fmt: skip


def loop_reopen(*, actor, project: Project, uid: str, via: str, idempotency_key: str | None = None) -> MemoryWrite:
    """Reopen the closed loop `uid`."""
    return _loop_set("loop.reopened", OpenLoopStatus.OPEN, actor=actor, project=project, uid=uid, via=via,
                     key=idempotency_key)  # fmt: skip
