"""A memory directory imported again: only what changed is written, to the same corpus.

`differences(project, data)` compares the checked records of the tree with the project's unit
rows; `apply_differences` writes them in one transaction: added units (COPY, `created`), changed
units (their fields, links and embedding; `changed`, or `admitted` when an inbox candidate
became an entry), removed units (their validity closed at the import; `changed`), a new frame
version when the manifest's routing changed, the layout kept for export, the corpus revision
bumped (every cached index of the corpus is rebuilt) and one audit row naming every change.
An erased unit stays erased: the repository's text never undoes a lead's erasure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.db import connection, transaction
from django.db.models import F, Max
from django.utils import timezone

from authority.audit import audit_record
from authority.selectors import current_frame_version
from authority.services import frame_version_create, promotion_create
from selection.corpus import CorpusData, CorpusError
from selection.corpus.custodian.layout import MC
from selection.memory.changes import memory_changes_append
from selection.memory.erasure import ERASED_KEY
from selection.memory.generated import links_copy
from selection.memory.importing import _embed, _refusals, _write_units
from selection.models import Corpus, MemoryChangeKind, MemoryUnit, Project, UnitLink, UnitStatus


@dataclass(frozen=True)
class Differences:
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    superseded: tuple[tuple[str, str], ...] = ()  # (new unit, the unit it supersedes), links added

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


@dataclass(frozen=True)
class Applied:
    differences: Differences
    frame_changes: tuple[str, ...]
    sequences: range


def _status(record) -> str:
    return (record.extras.get(MC) or {}).get("unit_status") or UnitStatus.ACTIVE


def _wanted(record) -> dict:
    unit = record.unit
    return {
        "evidence_class": unit.evidence_class,
        "title": unit.title,
        "text": unit.text,
        "paths": list(unit.paths),
        "subject": unit.subject or "",
        "facet": unit.facet or "",
        "root": unit.root,
        "extras": dict(record.extras),
        "status": _status(record),
        "valid_to": None,
        "supersedes": sorted(unit.supersedes),
    }


def _stored(project: Project) -> dict[str, dict]:
    rows = {
        values["uid"]: {**values, "supersedes": []}
        for values in MemoryUnit.objects.filter(project=project).values(
            "id",
            "uid",
            "evidence_class",
            "title",
            "text",
            "paths",
            "subject",
            "facet",
            "root",
            "extras",
            "status",
            "valid_to",
        )
    }
    for source, target in UnitLink.objects.filter(source__project=project, kind="supersedes").values_list(
        "source__uid", "target__uid"
    ):
        rows[source]["supersedes"].append(target)
    for row in rows.values():
        row["supersedes"].sort()
        row["paths"] = list(row["paths"] or [])
    return rows


def differences(project: Project, data: CorpusData) -> Differences:
    stored = _stored(project)
    wanted = {r.unit.id: _wanted(r) for r in data.units}
    changed, superseded = [], []
    for uid in sorted(stored.keys() & wanted.keys()):
        row, want = stored[uid], wanted[uid]
        if ERASED_KEY in (row["extras"] or {}):
            continue  # an erasure is a lead's decision: the repository's text does not undo it
        if any(row[key] != value for key, value in want.items()):
            changed.append(uid)
            superseded += [(uid, t) for t in want["supersedes"] if t not in row["supersedes"]]
    added = tuple(sorted(wanted.keys() - stored.keys()))
    for uid in added:
        superseded += [(uid, t) for t in wanted[uid]["supersedes"]]
    removed = tuple(
        sorted(
            uid
            for uid in stored.keys() - wanted.keys()
            if stored[uid]["valid_to"] is None and ERASED_KEY not in (stored[uid]["extras"] or {})
        )
    )
    return Differences(added, removed, tuple(changed), tuple(sorted(superseded)))


def apply_differences(project: Project, data: CorpusData, *, actor, lineage_key: str) -> Applied:
    # the corpus and its project exist: that is what a re-import is
    refusals = [issue for issue in _refusals(data) if issue.field not in ("slug", "name")]
    if refusals:
        raise CorpusError(refusals)
    by_id = {r.unit.id: r for r in data.units}
    spec = data.projects[0]
    with transaction.atomic():
        corpus = Corpus.objects.select_for_update().get(pk=project.corpus_id)
        diff = differences(project, data)
        current = current_frame_version(project=project)
        frame_changes = _frame_changes(current.snapshot if current else {}, spec.frame)
        lineage = dict(corpus.extras.get(lineage_key) or {})
        kept = {k: v for k, v in data.extras.items() if k != lineage_key}
        kept_changed = any(corpus.extras.get(k) != v for k, v in kept.items())  # a README, a preamble
        if diff.empty and not frame_changes and not kept_changed:
            return Applied(diff, (), range(corpus.sequence + 1, corpus.sequence + 1))
        before = corpus.sequence
        stored = _stored(project)
        if diff.added:
            start = (MemoryUnit.objects.filter(corpus=corpus).aggregate(m=Max("position"))["m"] or 0) + 1
            records = [replace(by_id[uid], line=start + i) for i, uid in enumerate(diff.added)]
            vectors, _model = _embed([r.unit.text for r in records], None)
            _write_units(corpus, {project.slug: project}, records, vectors, actor=actor)
            mark_candidates(corpus, [r.unit.id for r in records if _status(r) == UnitStatus.CANDIDATE])
        changes: list[tuple[int, str]] = []
        if diff.changed:
            records = [by_id[uid] for uid in diff.changed]
            vectors, _model = _embed([r.unit.text for r in records], None)
            ids = dict(MemoryUnit.objects.filter(corpus=corpus).values_list("uid", "id"))
            for record, vector in zip(records, vectors or [None] * len(records), strict=True):
                changes.append((ids[record.unit.id], _update(corpus, record, vector, stored[record.unit.id])))
            UnitLink.objects.filter(source_id__in=[ids[r.unit.id] for r in records]).delete()
            links_copy((r.unit for r in records), ids)
        if diff.removed:
            now = timezone.now()
            rows = MemoryUnit.objects.filter(corpus=corpus, uid__in=diff.removed)
            rows.update(valid_to=now)
            changes += [(pk, MemoryChangeKind.CHANGED) for pk in rows.order_by("uid").values_list("id", flat=True)]
        memory_changes_append(corpus.pk, changes, actor=actor, via="import", batch=f"{corpus.name}:reimport")
        lineage["version"] = int(lineage.get("version", 1)) + 1
        extras = {**corpus.extras, **kept}
        extras[lineage_key] = {**lineage, "source": (data.extras.get(lineage_key) or {}).get("source", "")}
        Corpus.objects.filter(pk=corpus.pk).update(extras=extras, revision=F("revision") + 1)
        if frame_changes:
            version = frame_version_create(
                project=project, snapshot=spec.frame, parent=current, author=actor, origin="import"
            )
            promotion_create(project=project, frame_version=version, promoted_by=actor)
        after = Corpus.objects.filter(pk=corpus.pk).values_list("sequence", flat=True).get()
        audit_record(
            actor=actor,
            project=project,
            action="memory.reimported",
            obj=corpus,
            summary=(
                f"{project.slug}: memory version {lineage['version']} applied to corpus {corpus.name} "
                f"(+{len(diff.added)} -{len(diff.removed)} ~{len(diff.changed)} units)"
            ),
            payload={
                "version": lineage["version"],
                "added": list(diff.added),
                "removed": list(diff.removed),
                "changed": list(diff.changed),
                "superseded": [list(pair) for pair in diff.superseded],
                "frame_changes": list(frame_changes),
                "sequences": [before + 1, after],
            },
        )
    return Applied(diff, frame_changes, range(before + 1, after + 1))


def mark_candidates(corpus: Corpus, uids: list[str]) -> None:
    """Inbox candidates: status `candidate`, in the row and in the state of its `created` change
    (written in the same transaction, so no reader sees the unit as active)."""
    if not uids:
        return
    # no embedding either: dense search in PostgreSQL (hnsw) never meets a candidate
    MemoryUnit.objects.filter(corpus=corpus, uid__in=uids).update(status=UnitStatus.CANDIDATE, embedding=None)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE selection_memorychange c SET state = jsonb_set(c.state, '{status}', '"candidate"')
            FROM selection_memoryunit u
            WHERE c.unit_id = u.id AND u.corpus_id = %s AND u.uid = ANY(%s) AND c.kind = 'created'
            """,
            [corpus.pk, uids],
        )


def _update(corpus: Corpus, record, vector, row: dict) -> str:
    unit = record.unit
    status = _status(record)
    fields = dict(
        evidence_class=unit.evidence_class,
        title=unit.title,
        text=unit.text,
        tokens=unit.tokens,
        paths=list(unit.paths),
        subject=unit.subject or "",
        facet=unit.facet or "",
        root=unit.root,
        extras=dict(record.extras),
        status=status,
        valid_to=None,
    )
    if status != UnitStatus.ACTIVE:
        fields["embedding"] = None  # dense search never meets a candidate
    elif vector is not None:
        fields["embedding"] = vector
    MemoryUnit.objects.filter(corpus=corpus, uid=unit.id).update(**fields)
    if row["status"] == UnitStatus.CANDIDATE and status == UnitStatus.ACTIVE:
        return MemoryChangeKind.ADMITTED
    return MemoryChangeKind.CHANGED


def _frame_changes(before: dict, after: dict) -> tuple[str, ...]:
    """Top-level frame keys whose value differs (routing keys included)."""
    return tuple(sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key)))
