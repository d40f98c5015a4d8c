"""Write admission as frame policy: the frame's `memory.admission` says how a write lands.

`direct` (the default): every write is active at once. `candidate`: a write through an agent token
lands as a candidate, never selected, in the project's "To admit" queue, where a lead or a reviewer
admits or declines it with a reason; a lead's own write stays direct. The key is a frame field
like any other, changed only by a proposal, and backtested like one.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from authority import access
from authority.audit import audit_record
from authority.selectors import current_frame_version
from selection.corpus.frames import memory_admission
from selection.memory.changes import memory_changes_append
from selection.memory.writes.conflicts import conflicts_of
from selection.memory.writes.records import VIAS, MemoryWrite, supersession_close
from selection.memory.writes.validation import WriteConflict, WriteRefused
from selection.models import MemoryChange, MemoryChangeKind, MemoryUnit, Project, UnitStatus

MAX_REASON = 500


def project_snapshot(project: Project) -> dict | None:
    """The project's current frame snapshot (what its promoted version says)."""
    version = current_frame_version(project=project)
    return None if version is None else version.snapshot


def landing_status(caps: access.Capabilities, snapshot: dict | None) -> str:
    """How a write by someone with `caps` lands under the frame: a candidate when the frame admits
    memory as candidates and the write comes through an agent token, else active."""
    if caps.agent and memory_admission(snapshot) == "candidate":
        return UnitStatus.CANDIDATE
    return UnitStatus.ACTIVE


def candidates_of(project: Project):
    """The project's "To admit" queue: its candidate units, oldest first."""
    return MemoryUnit.objects.filter(project=project, status=UnitStatus.CANDIDATE).order_by("created_sequence", "uid")


def candidate_writer(unit: MemoryUnit):
    """Who wrote the candidate (the actor of its `created` change), or None."""
    change = MemoryChange.objects.filter(unit=unit, kind=MemoryChangeKind.CREATED).select_related("actor").first()
    return change.actor if change is not None else None


def _decided(action: str, *, actor, project: Project, uid: str, reason: str, via: str) -> MemoryWrite:
    access.access_admit_memory(actor, project)
    if via not in VIAS:
        raise ValueError(f"unknown write surface {via!r}")
    reason = " ".join((reason or "").split())
    if not reason:
        raise WriteRefused("reason: say why (it is kept in the audit log)", field=("reason",))
    if len(reason) > MAX_REASON:
        raise WriteRefused(f"reason: {len(reason)} characters; at most {MAX_REASON}", field=("reason",))
    admit = action == "unit.admitted"
    with transaction.atomic():
        unit = (
            MemoryUnit.objects.select_for_update(of=("self",))
            .select_related("project")
            .filter(project=project, uid=uid)
            .first()
        )
        if unit is None:
            raise WriteRefused(f'unit: {project.slug} holds no unit "{uid}"', field=("unit",))
        if unit.status != UnitStatus.CANDIDATE:
            raise WriteConflict(f"{uid} is {unit.status}, not a candidate: there is nothing to decide")
        writer = candidate_writer(unit)
        if writer is not None and writer.pk == actor.pk:
            raise WriteConflict(f"{actor.username} wrote {uid}: another lead or reviewer admits or declines it")
        conflicts = [c.uid for c in conflicts_of(unit)]
        unit.status = UnitStatus.ACTIVE if admit else UnitStatus.DECLINED
        unit.save(update_fields=["status"])
        changes = [(unit.pk, MemoryChangeKind.ADMITTED if admit else MemoryChangeKind.DECLINED)]
        closed = []
        if admit:
            # supersession takes effect when the successor does
            from_services = supersession_close(unit, now=timezone.now())
            closed = [t.uid for t in from_services]
            changes += [(t.pk, MemoryChangeKind.CHANGED) for t in from_services]
        sequences = memory_changes_append(project.corpus_id, changes, actor=actor, via=via)
        document = {
            "action": action,
            "unit": unit.uid,
            "project": project.slug,
            "status": unit.status,
            "sequence": sequences[0],
            "sequences": list(sequences),
            "closed": closed,
            "conflicts": conflicts,
            "reason": reason,
        }
        audit_record(
            actor=actor,
            project=project,
            action=action,
            obj=unit,
            summary=f"{unit.uid} {'admitted' if admit else 'declined'}: {reason}",
            payload={**document, "via": via, "writer": getattr(writer, "username", None)},
        )
    return MemoryWrite(document=document)


def unit_admit(*, actor, project: Project, uid: str, reason: str, via: str) -> MemoryWrite:
    """Admit a candidate: it becomes active (selectable), the units it supersedes close."""
    return _decided("unit.admitted", actor=actor, project=project, uid=uid, reason=reason, via=via)


def unit_decline(*, actor, project: Project, uid: str, reason: str, via: str) -> MemoryWrite:
    """Decline a candidate: it stays, declined, never selected; its id stays taken."""
    return _decided("unit.declined", actor=actor, project=project, uid=uid, reason=reason, via=via)
