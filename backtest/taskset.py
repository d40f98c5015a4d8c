"""A project's task set as a backtest replays it, and the digest an approval binds to.

The set and its versions are selection's (selection.evaluation.task_sets): the labelling of traces adds tasks.
"""

from __future__ import annotations

from selection.evaluation.task_sets import project_tasks, task_set_digest, task_set_version_record, tasks_digest

__all__ = ["project_tasks", "task_set_digest", "task_set_version_record", "tasks_digest"]
