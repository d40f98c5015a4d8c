"""The engine requests of the bench generator's tasks, for the scripts that time the engine's select()
alone (c6_cpu.py, c6_stages.py); the bench itself selects through selection.serving."""

from __future__ import annotations

from selection.engine.types import SelectionRequest, WorkFrame


def engine_requests(bench, condition: str) -> list[SelectionRequest]:
    """One request a task of `bench` (a generated corpus), at `condition`, with the task's vectors."""
    return [
        SelectionRequest(
            project_frame=bench.frames[t.project],
            work_frame=WorkFrame(objective=t.objective, work_type=t.work_type, standpoint=t.standpoint),
            query=t.query,
            budget_tokens=t.budget_tokens,
            condition=condition,
            query_vector=t.query_vector,
            objective_vector=t.objective_vector,
        )
        for t in bench.tasks
    ]
