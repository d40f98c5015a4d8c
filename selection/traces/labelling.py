"""Ledgers from traces: a lead or reviewer turns a trace's selection into an evaluation task by
labelling the units the work needed; the task joins the project's task set as a new version.

The one writer of labelled tasks (page and API call `trace_label`); it checks its role itself
and writes the task, its ledger, the new task-set version, the labelling and the audit row in one
transaction. Labels are ledgers: selection code never reads them back (selection.evaluation.scoring does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Exists, Max, OuterRef, QuerySet

from authority import access
from authority.audit import audit_record
from selection.evaluation.task_sets import task_set_digest
from selection.models import (
    LedgerEntry,
    LedgerLabel,
    MemoryUnit,
    Project,
    Task,
    TaskLabelling,
    TaskSetVersion,
    TaskSignal,
    Trace,
    TraceCandidate,
)
from selection.serving.selections import SelectionError

UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
QUEUE_SIZE = 50
REAL_TRAFFIC = ("select", "api")  # traces an agent's request wrote, not a replay


class LabellingRefused(SelectionError):
    """Labels that cannot become a task: none given, an unknown label or unit, a taken id."""


@dataclass(frozen=True)
class Labelled:
    task: Task
    version: TaskSetVersion


def _version(project: Project, *, number: int, digest: str, reason: str, user) -> TaskSetVersion:
    return TaskSetVersion.objects.create(
        project=project,
        number=number,
        digest=digest,
        tasks=Task.objects.filter(project=project).count(),
        reason=reason,
        created_by=user if getattr(user, "pk", None) else None,
    )


def trace_label(*, trace: Trace, user, labels: dict[str, str], uid: str = "") -> Labelled:
    """The trace's request (query, budget, standpoint, declared work frame and signals) becomes a
    task of its project whose ledger is `labels` (unit id -> MUST, SHOULD, OPTIONAL, DISTRACTOR or
    HARMFUL, units of the trace's candidate table); the project's task set gets a new version."""
    project = trace.project
    access.access_label(user, project)
    labels = {unit: (label or "").strip().upper() for unit, label in labels.items() if (label or "").strip()}
    if not labels:
        raise LabellingRefused("label at least one unit (MUST, SHOULD, ...) to make a task")
    unknown = sorted(label for label in set(labels.values()) if label not in LedgerLabel.values)
    if unknown:
        raise LabellingRefused(f"unknown label {', '.join(unknown)}: one of {', '.join(LedgerLabel.values)}")
    uid = (uid or "").strip() or f"trace-{trace.pk}"
    if not UID.fullmatch(uid):
        raise LabellingRefused(f'task id "{uid}": letters, digits, ".", "_" and "-" only (200 at most)')
    candidates = set(TraceCandidate.objects.filter(trace=trace).values_list("unit_uid", flat=True))
    outside = sorted(set(labels) - candidates)
    if outside:
        raise LabellingRefused(f"not candidates of trace #{trace.pk}: {', '.join(outside[:5])}")
    with transaction.atomic():
        Project.objects.select_for_update().get(pk=project.pk)  # one task-set version at a time
        if TaskLabelling.objects.filter(trace=trace).exists():
            raise LabellingRefused(f"trace #{trace.pk} is already labelled")
        if Task.objects.filter(corpus_id=project.corpus_id, uid=uid).exists():
            raise LabellingRefused(f'the corpus already has a task "{uid}"')
        units = dict(
            MemoryUnit.objects.filter(corpus_id=project.corpus_id, uid__in=labels).values_list("uid", "pk")
        )
        missing = sorted(set(labels) - set(units))
        if missing:
            raise LabellingRefused(f"units no longer in the corpus: {', '.join(missing[:5])}")
        latest = TaskSetVersion.objects.filter(project=project).aggregate(n=Max("number"))["n"]
        if latest is None:  # the set as imported becomes version 1, before it changes
            latest = _version(project, number=1, digest=task_set_digest(project=project),
                              reason="the task set as imported", user=None).number
        work = (trace.header or {}).get("work_frame") or {}
        task = Task.objects.create(
            corpus_id=project.corpus_id,
            project=project,
            uid=uid,
            position=(Task.objects.filter(corpus_id=project.corpus_id).aggregate(n=Max("position"))["n"] or 0) + 1,
            query=trace.query,
            standpoint=trace.standpoint,
            budget_tokens=trace.budget_tokens,
            frame=_task_frame(work),
            # the task replays against memory as the trace's selection saw it
            memory_sequence=trace.memory_sequence,
        )
        for position, signal in enumerate(work.get("signals") or ()):
            TaskSignal.objects.create(
                task=task, uid=signal.get("id") or f"s{position}", kind=signal.get("kind", ""),
                content=signal.get("content", ""), position=position,
            )
        LedgerEntry.objects.bulk_create(
            LedgerEntry(task=task, unit_id=units[unit], label=label) for unit, label in sorted(labels.items())
        )
        version = _version(
            project, number=latest + 1, digest=task_set_digest(project=project),
            reason=f"task {uid} labelled from trace #{trace.pk} by {user.username}", user=user,
        )
        TaskLabelling.objects.create(task=task, trace=trace, labelled_by=user, task_set_version=version)
        audit_record(
            actor=user,
            project=project,
            action="task.labelled",
            obj=task,
            summary=f"task {uid} from trace #{trace.pk}: {project.slug}'s task set is now v{version.number}",
            payload={"trace": trace.pk, "task": uid, "labels": labels, "task_set_version": version.number},
        )
    return Labelled(task, version)


def _task_frame(work: dict) -> dict:
    """The trace header's work frame as a task declares it (tasks.yaml): `cites` is a mapping of
    name -> ids there, a list of [name, ids] pairs in the trace."""
    frame = {key: work[key] for key in ("objective", "work_type", "constraints") if work.get(key)}
    cites = work.get("cites")
    if cites:
        frame["cites"] = {name: list(ids) for name, ids in (cites.items() if isinstance(cites, dict) else cites)}
    return frame


def unlabelled_traces(*, user, project: Project | None = None, work_type: str = "") -> QuerySet[Trace]:
    """Recent traces of real requests (not replays) no one has labelled yet, in the projects `user`
    reads, newest first; filtered by project and by declared work type."""
    traces = (
        Trace.objects.filter(
            project__in=access.readable_projects(user, Project.objects.all()), source__in=REAL_TRAFFIC
        )
        .annotate(labelled=Exists(TaskLabelling.objects.filter(trace=OuterRef("pk"))))
        .filter(labelled=False)
        .select_related("project")
        .order_by("-created_at", "-id")
    )
    if project is not None:
        traces = traces.filter(project=project)
    if work_type:
        traces = traces.filter(header__work_frame__work_type=work_type)
    return traces[:QUEUE_SIZE]
