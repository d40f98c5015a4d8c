"""Health writes: read a project's promoted frame on its task set, judge it, say when it flips.

`health_check` is the one path (the Celery task, the daily schedule, the `frame_health` command
and the page's button all end in it). A reading replays every task of the project under the
promoted frame version (condition C6, as a backtest's replays), scores it against the ledgers,
and judges it under the frame's gates against each task's first reading under that version
(judge.py). One row per (project, trigger key): a second delivery of the same trigger writes
nothing. When a gate starts failing the reading's transaction also writes the `health.alert`
audit row (which the webhooks turn into signed deliveries and the inboxes show); when every gate
passes again after an alert, `health.recovered`.
"""

from __future__ import annotations

import logging
import uuid

from celery import current_app
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from authority import access
from authority.audit import audit_record, register_audit_listener
from authority.selectors import current_frame_version
from rules import health_judgement as judge
from selection.engine.gates import Gates
from selection.engine.metrics import score_bundle
from selection.engine.pipeline import ENGINE_VERSION
from selection.evaluation.scoring import ledgers_for_tasks
from selection.evaluation.task_sets import project_tasks, task_set_versions, tasks_digest
from selection.memory import store
from selection.models import Corpus, Project, Task
from selection.serving.framing import FramingError, task_work_frame
from selection.serving.selections import SelectionError, replay_task

from ..models import FrameHealth, HealthTransition, HealthTrigger

logger = logging.getLogger(__name__)

CONDITION = "C6"  # as a backtest replays
HEALTH_TASK = "backtest.frame_health"
DAILY_TASK = "backtest.frame_health_daily"
ALERT_ACTION = "health.alert"
RECOVERED_ACTION = "health.recovered"

# audit actions that set off a reading of their project, once the write commits
TRIGGER_ACTIONS = {
    "frame.imported": HealthTrigger.IMPORT,  # a corpus import: one row per project it creates
    "memory.reimported": HealthTrigger.IMPORT,
    "task.labelled": HealthTrigger.TASK_SET,
    "proposal.promoted": HealthTrigger.PROMOTION,
}


class HealthError(RuntimeError):
    """A reading that cannot be taken: a task cannot be replayed under the frame."""


# --- one reading -------------------------------------------------------------------------------


def _read_tasks(project: Project, version, task_rows: list[dict]) -> dict[str, dict]:
    """task pk (str) -> {"uid", "metrics"} of every task replayed under `version` (no trace)."""
    _number, frame = store.frame_of_version(version.pk, version=version)
    rows = Task.objects.filter(pk__in=[r["id"] for r in task_rows]).select_related("project", "corpus")
    tasks = {t.pk: t for t in rows}
    ledgers = ledgers_for_tasks(list(tasks))
    maps: dict[int, tuple[dict, dict]] = {}
    readings: dict[str, dict] = {}
    for row in task_rows:
        task = tasks[row["id"]]
        work_frame = None
        if frame.establishment.builder != "declared":
            # as a backtest does: a frame that names a builder is read as an agent that declares
            # nothing would meet it
            try:
                work_frame = task_work_frame(task=task, builder=frame.establishment.builder, project_frame=frame)
            except FramingError as error:
                raise HealthError(f"{task.uid}: {error}") from error
        try:
            selection = replay_task(
                task=task, frame_version=version, condition=CONDITION, source="health", persist=False,
                work_frame=work_frame,
            )  # fmt: skip
        except SelectionError as error:
            raise HealthError(f"{task.uid}: {error}") from error
        if task.corpus_id not in maps:
            index = store.corpus_index(task.corpus_id)
            maps[task.corpus_id] = ({u.id: u.project for u in index.units}, {u.id: u.echo_of for u in index.units})
        project_of, echo_of = maps[task.corpus_id]
        metrics = score_bundle(
            selection.result.bundle, ledgers[task.pk], project_of=project_of, echo_of=echo_of, scope=frame.scope_set
        )
        readings[str(task.pk)] = {"uid": task.uid, "metrics": metrics}
    return readings


def _reference(project: Project, version, now: dict[str, dict]) -> dict[str, dict[str, float]]:
    """Each task's first reading under `version`; a task never read under it is its own."""
    reference: dict[str, dict[str, float]] = {}
    wanted = set(now)
    earlier = (
        FrameHealth.objects.filter(project=project, frame_version=version).order_by("created_at", "id")
        .values_list("per_task", flat=True)
    )  # fmt: skip
    for per_task in earlier.iterator(chunk_size=20):
        for task_id in wanted & set(per_task):
            reference[task_id] = per_task[task_id]["metrics"]
        wanted -= set(per_task)
        if not wanted:
            break
    for task_id in wanted:
        reference[task_id] = now[task_id]["metrics"]
    return reference


def health_check(*, project: Project, trigger: str, key: str = "", actor=None) -> FrameHealth | None:
    """Read `project`'s promoted frame on its task set now and store the reading, once per `key`.

    None when there is nothing to read: no promoted frame, or no task. `actor` (None: the system)
    must be a lead or a reviewer of the project. An alert or a recovery is written in the reading's
    transaction (see the module's docstring).
    """
    if actor is not None:
        access.access_replay(actor, project)  # before any work: a refused reading writes nothing
    if trigger not in HealthTrigger.values:
        raise HealthError(f'unknown trigger "{trigger}": one of {", ".join(HealthTrigger.values)}')
    key = key or f"{trigger}:{uuid.uuid4().hex}"
    found = FrameHealth.objects.filter(project=project, trigger_key=key).first()
    if found is not None:
        return found
    version = current_frame_version(project=project)
    task_rows = project_tasks(project)
    if version is None or not task_rows:
        return None
    digest = tasks_digest(task_rows)
    corpus_revision, memory_sequence = (
        Corpus.objects.filter(pk=project.corpus_id).values_list("revision", "sequence").get()
    )  # fmt: skip
    now = _read_tasks(project, version, task_rows)
    gates = Gates.from_spec(version.snapshot.get("gates"))
    with transaction.atomic():
        Project.objects.select_for_update().get(pk=project.pk)  # one reading's transition at a time
        found = FrameHealth.objects.filter(project=project, trigger_key=key).first()
        if found is not None:
            return found
        if current_frame_version(project=project).pk != version.pk:
            # promoted while we read: this reading is of a version no longer current; the
            # promotion set off its own reading
            logger.info("health of %s: v%s was replaced while it was read", project.slug, version.number)
            return None
        reference = _reference(project, version, now)
        reading = judge.judge(gates, reference, {t: r["metrics"] for t, r in now.items()})
        previous = FrameHealth.objects.filter(project=project).order_by("-created_at", "-id").first()
        before = _failing(previous) if previous is not None else None
        change, gates_changed = judge.transition(before, reading.failing)
        growth = None
        if previous is not None and previous.memory_sequence is not None and previous.corpus_id == project.corpus_id:
            growth = max(0, memory_sequence - previous.memory_sequence)
        row = FrameHealth.objects.create(
            project=project,
            frame_version=version,
            task_set_digest=digest,
            task_set_version=task_set_versions(project=project).get(digest),
            tasks=len(task_rows),
            corpus_id=project.corpus_id,
            corpus_revision=corpus_revision,
            memory_sequence=memory_sequence,
            memory_growth=growth,
            engine_version=ENGINE_VERSION,
            condition=CONDITION,
            trigger=trigger,
            trigger_key=key,
            requested_by=actor if getattr(actor, "pk", None) else None,
            primary_metric=reading.primary_metric,
            means=reading.means,
            gate_results=[g.as_dict() for g in reading.gates],
            per_task=now,
            passed=reading.passed,
            transition=change,
        )
        if change:
            _audit_transition(row, reading, change, gates_changed)
    return row


def health_check_by_id(*, project_id: int, trigger: str, key: str, requested_by_id: int | None = None) -> int | None:
    """The Celery task's way in: ids in, the reading's id out (None: nothing to read)."""
    project = Project.objects.select_related("corpus").get(pk=project_id)
    actor = get_user_model().objects.get(pk=requested_by_id) if requested_by_id is not None else None
    row = health_check(project=project, trigger=trigger, key=key, actor=actor)
    return row.pk if row is not None else None


def _failing(row: FrameHealth) -> tuple[str, ...]:
    return tuple(g["key"] for g in row.gate_results if not g["passed"])


def _audit_transition(row: FrameHealth, reading: judge.HealthReading, change: str, gates_changed) -> None:
    project = row.project
    version = row.frame_version.number
    if change == HealthTransition.ALERT:
        why = "; ".join(g.reason for g in reading.gates if g.key in gates_changed)
        action, summary = ALERT_ACTION, f"{project.slug} v{version} now fails {', '.join(gates_changed)}: {why}"
    else:
        recovered = ", ".join(gates_changed)
        action, summary = RECOVERED_ACTION, f"{project.slug} v{version} passes every gate again ({recovered} recovered)"
    audit_record(
        actor=None,
        project=project,
        action=action,
        obj=row,
        summary=summary,
        payload={
            "state": "failing" if change == HealthTransition.ALERT else "recovered",
            "reading": row.pk,
            "frame_version": version,
            "task_set_version": row.task_set_version,
            "task_set_digest": row.task_set_digest,
            "corpus_revision": row.corpus_revision,
            "trigger": row.trigger,
            "changed": list(gates_changed),
            "failing": list(reading.failing),
            "gates": [g.as_dict() for g in reading.gates],
        },
    )


# --- queueing: triggers and the daily schedule ---------------------------------------------------


def health_enqueue(*, project_id: int, trigger: str, key: str, requested_by_id: int | None = None) -> None:
    """Queue a reading once the current transaction commits (at once outside one)."""

    def send() -> None:
        current_app.send_task(HEALTH_TASK, args=(project_id, trigger, key, requested_by_id))

    transaction.on_commit(send, robust=True)


def health_request(*, project: Project, user) -> str:
    """A lead or a reviewer asks for a reading now; it runs on a worker. Returns its trigger key."""
    access.access_replay(user, project)
    key = f"manual:{uuid.uuid4().hex}"
    health_enqueue(project_id=project.pk, trigger=HealthTrigger.MANUAL, key=key, requested_by_id=user.pk)
    return key


def health_schedule(*, day: str | None = None) -> list[int]:
    """The daily run: queue one reading per project with a promoted frame and a task, keyed by the
    day (a second run on the same day reads nothing twice). Returns the projects queued."""
    day = day or timezone.localdate().isoformat()
    projects = list(
        Project.objects.filter(tasks__isnull=False).distinct().order_by("pk").values_list("pk", flat=True)
    )
    for project_id in projects:
        health_enqueue(project_id=project_id, trigger=HealthTrigger.SCHEDULE, key=f"schedule:{day}")
    return projects


def on_audit(entry) -> None:
    """authority.audit's listener: an import, a task-set change or a promotion of a project queues
    a reading of it on commit, keyed by the audit row (a redelivery reads nothing twice)."""
    trigger = TRIGGER_ACTIONS.get(entry.action)
    if trigger is None or entry.project_id is None or not settings.FG_HEALTH_ON_CHANGE:
        return
    health_enqueue(project_id=entry.project_id, trigger=trigger, key=f"{trigger}:audit-{entry.pk}")


def connect() -> None:
    """Called once by BacktestConfig.ready."""
    register_audit_listener(on_audit)
