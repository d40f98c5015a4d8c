"""A project's task set as a backtest replays it, and the digest an approval binds to."""

from __future__ import annotations

import hashlib
import json

from selection.models import Project, Task
from selection.scoring import ledgers_for_tasks


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
