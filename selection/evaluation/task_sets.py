"""A project's task set: its tasks in order with their ledgers, the digest an approval binds to,
and the numbered versions (TaskSetVersion) a backtest or an evaluation names."""

from __future__ import annotations

import hashlib
import json

from django.db.models import Max

from selection.evaluation.scoring import ledgers_for_tasks
from selection.models import Project, Task, TaskSetVersion


def project_tasks(project: Project) -> list[dict]:
    return list(
        Task.objects.filter(project=project)
        .order_by("position", "id")
        .values("id", "uid", "query", "budget_tokens", "standpoint", "frame")
    )


def tasks_digest(tasks: list[dict]) -> str:
    ledgers = ledgers_for_tasks([t["id"] for t in tasks])
    doc = [
        {
            "id": t["uid"],
            "query": t["query"],
            "budget_tokens": t["budget_tokens"],
            "standpoint": t["standpoint"].isoformat() if t["standpoint"] else None,
            "frame": t["frame"],
            "ledger": sorted(ledgers[t["id"]].items()),
        }
        for t in tasks
    ]
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def task_set_digest(*, project: Project) -> str:
    """sha256 of the project's tasks (ids, queries, budgets, frames) and their ledgers, in order.

    An approval binds to it: when a task or a ledger changes, promotion asks for a new backtest.
    """
    return tasks_digest(project_tasks(project))


def task_set_versions(*, project: Project) -> dict[str, int]:
    """digest -> version number of the project's recorded task sets (one query). A digest with no
    number is the set as imported, before anyone changed it: version 1 once a change is recorded."""
    return dict(TaskSetVersion.objects.filter(project=project).values_list("digest", "number"))


def task_set_version_record(*, project: Project, digest: str, tasks: int, reason: str = "") -> TaskSetVersion:
    """The numbered version of `project`'s task set whose digest is `digest`: the one recorded, or
    a new one (version 1 "the task set as imported" when none is recorded yet). A backtest and an
    evaluation call it for the set they run on, so each names its version.

    The caller holds the project's row lock (select_for_update) in its transaction: the numbers
    are taken one at a time, as a labelling takes them."""
    found = TaskSetVersion.objects.filter(project=project, digest=digest).order_by("-number").first()
    if found is not None:
        return found
    latest = TaskSetVersion.objects.filter(project=project).aggregate(n=Max("number"))["n"]
    if latest is None:
        reason = "the task set as imported"
    return TaskSetVersion.objects.create(
        project=project,
        number=(latest or 0) + 1,
        digest=digest,
        tasks=tasks,
        reason=reason or "the task set changed outside labelling",
    )


def task_set_label(digest: str, versions: dict[str, int], recorded: TaskSetVersion | None = None) -> str:
    """How a page names the task set a run used: "v3" (the version the run recorded, else the one
    with its digest), or "as imported" for a run before any version was recorded."""
    if recorded is not None:
        return f"v{recorded.number}"
    number = versions.get(digest)
    if number is not None:
        return f"v{number}"
    return "as imported" if not versions else "unrecorded"
