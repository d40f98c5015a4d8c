"""The backtest app's API routes: one backtest (state, progress, gates, per-task deltas), reviews.

A review goes through governance.services.backtest_review, the service the proposal page posts
to; reads check access_read on the backtest's project, as the backtest page does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.urls import reverse
from ninja import Field, Router, Schema, Status

from governance import access
from governance import services as governance_services
from governance.selectors import review_blockers
from selection.api_fields import Id, Text

from . import selectors

router = Router(tags=["backtest"])


class ProgressOut(Schema):
    done: int
    total: int
    percent: int
    finished: bool


class GateOut(Schema):
    gate: str
    metric: str
    baseline: float | None
    candidate: float | None
    passed: bool
    reason: str


class DecisionOut(Schema):
    passed: bool
    primary_metric: str
    baseline_means: dict[str, float | None]
    candidate_means: dict[str, float | None]
    gates: list[GateOut]
    per_task_deltas: list[dict[str, Any]]
    decided_at: datetime


class ApprovalOut(Schema):
    verdict: str
    comment: str
    reviewer: str
    decided_at: datetime


class TaskRowOut(Schema):
    task: str
    baseline_trace: int | None
    candidate_trace: int | None
    metrics: dict[str, dict[str, float | None]] = Field(description="metric -> baseline, candidate, delta")


class BacktestOut(Schema):
    id: int
    url: str
    page_url: str
    proposal_id: int
    proposal_url: str
    project: str
    status: str
    error: str
    baseline_version: int
    candidate_version: int
    condition: str
    engine_version: str
    task_set_digest: str
    created_at: datetime
    finished_at: datetime | None
    progress: ProgressOut
    decision: DecisionOut | None
    approval: ApprovalOut | None
    review_blockers: list[str]
    tasks: list[TaskRowOut]


class ReviewIn(Schema):
    verdict: Literal["approve", "reject"]
    comment: Text = Field("", max_length=20_000, description="required to reject")


def _gate(row: dict) -> dict:
    return {
        "gate": str(row.get("gate", "")),
        "metric": str(row.get("metric", "")),
        "baseline": row.get("baseline"),
        "candidate": row.get("candidate"),
        "passed": bool(row.get("passed")),
        "reason": str(row.get("reason", "")),
    }


def _backtest(backtest) -> dict:
    decision, approval = selectors.backtest_outcome(backtest)
    progress = selectors.backtest_progress(backtest=backtest)
    return {
        "id": backtest.pk,
        "url": reverse("api-1:backtest", args=[backtest.pk]),
        "page_url": reverse("backtest-detail", args=[backtest.pk]),
        "proposal_id": backtest.proposal_id,
        "proposal_url": reverse("api-1:proposal", args=[backtest.proposal_id]),
        "project": backtest.proposal.project.slug,
        "status": backtest.status,
        "error": backtest.error,
        "baseline_version": backtest.baseline_version.number,
        "candidate_version": backtest.candidate_version.number,
        "condition": backtest.condition,
        "engine_version": backtest.engine_version,
        "task_set_digest": backtest.task_set_digest,
        "created_at": backtest.created_at,
        "finished_at": backtest.finished_at,
        "progress": {
            "done": progress.done,
            "total": progress.total,
            "percent": progress.percent,
            "finished": progress.finished,
        },
        "decision": None
        if decision is None
        else {
            "passed": decision.passed,
            "primary_metric": decision.primary_metric,
            "baseline_means": decision.baseline_means,
            "candidate_means": decision.candidate_means,
            "gates": [_gate(g) for g in decision.gate_results],
            "per_task_deltas": decision.per_task_deltas,
            "decided_at": decision.decided_at,
        },
        "approval": None
        if approval is None
        else {
            "verdict": approval.verdict,
            "comment": approval.comment,
            "reviewer": approval.reviewer.username,
            "decided_at": approval.decided_at,
        },
        "review_blockers": review_blockers(backtest=backtest) if decision is not None else [],
        "tasks": [
            {
                "task": row.task,
                "baseline_trace": row.baseline_trace,
                "candidate_trace": row.candidate_trace,
                "metrics": {
                    cell.metric: {"baseline": cell.baseline, "candidate": cell.candidate, "delta": cell.delta}
                    for cell in row.cells
                },
            }
            for row in selectors.task_rows(backtest=backtest)
        ],
    }


@router.get("/backtests/{backtest_id}", response=BacktestOut, url_name="backtest", summary="One backtest")
def backtest_detail(request, backtest_id: Id):
    """State and progress while it runs; then the gates with their reasons and per-task deltas."""
    backtest = selectors.backtest_by_id(backtest_id=backtest_id)
    access.access_read(request.auth, backtest.proposal.project)
    return _backtest(backtest)


@router.post(
    "/backtests/{backtest_id}/reviews",
    response={201: BacktestOut},
    url_name="backtest-review",
    summary="Approve or reject a finished backtest",
)
def backtest_review(request, backtest_id: Id, body: ReviewIn):
    backtest = selectors.backtest_by_id(backtest_id=backtest_id)
    governance_services.backtest_review(
        backtest=backtest, reviewer=request.auth, verdict=body.verdict, comment=body.comment
    )
    return Status(201, _backtest(selectors.backtest_by_id(backtest_id=backtest_id)))
