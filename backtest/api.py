"""The backtest app's API routes: one backtest (state, progress, gates, per-task deltas), its review,
and a project's frame health.

As on the backtest pages: reads check access_read; a verdict goes through
review.services.backtest_review, which checks its role itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import Field, Router, Schema, Status

from authority import access
from selection.api_fields import Id, Text
from selection.evaluation.task_sets import task_set_label, task_set_versions
from selection.models import Project

from . import selectors
from .health import selectors as health_selectors
from .review import card as review_card
from .review import markdown as review_markdown
from .review import selectors as review_selectors
from .review import services as review_services

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
    ablation: list[dict[str, Any]] = Field(
        default_factory=list,
        description="one row per part of the proposal: part, alone, marginal, flagged, hurt_tasks (2 parts or more)",
    )
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


class WorseOut(Schema):
    metric: str
    baseline: float
    candidate: float


class RegressedTaskOut(Schema):
    task: str = Field(description="the task's uid, what an approval lists in `acknowledged`")
    worse: list[WorseOut]
    diff_url: str | None


class ShadowOut(Schema):
    requested: int = Field(description="how many of the project's last live selections were asked for")
    replayed: int
    changed: int = Field(description="selections whose bundle the candidate changes")
    errors: int
    summary: str = Field(description='"would change K of N recent bundles"')
    selections: list[dict[str, Any]] = Field(
        description="per selection: trace, changed, entered, left, tokens, leakage, diff (a page link), error"
    )


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
    task_set_version: str = Field("", description='the project\'s task-set version it replayed: "v3", or "as imported"')
    task_set_version_number: int | None = Field(
        None, description="that version's number; null for a backtest made before versions were recorded"
    )
    memory: str = Field(
        "as of each task",
        description='"as of each task": every task replayed against memory at the sequence it was made at; "now": '
        "against memory as it stands",
    )
    created_at: datetime
    finished_at: datetime | None
    progress: ProgressOut
    decision: DecisionOut | None
    approval: ApprovalOut | None = Field(None, description="the latest review (an approval or a rejection)")
    reviews: list[ApprovalOut] = Field(default_factory=list, description="every review, oldest first")
    reviews_summary: str = Field("", description="where the reviews stand against the approval policy")
    review_blockers: list[str]
    regressed_tasks: list[RegressedTaskOut] = Field(
        default_factory=list,
        description="tasks the candidate made worse on any quality metric; approving acknowledges each",
    )
    tasks: list[TaskRowOut]
    shadow: ShadowOut | None = Field(None, description="the shadow replay of recent live selections, once finished")


class ReviewIn(Schema):
    verdict: Literal["approve", "reject"]
    comment: Text = Field("", max_length=20_000, description="required to reject")
    acknowledged: list[Text] = Field(
        default_factory=list,
        max_length=10_000,
        description=(
            "to approve: the uid of every task the backtest made worse (its `regressed_tasks`); "
            "an approval missing one is refused with 422 naming them"
        ),
    )


def _gate(row: dict) -> dict:
    return {
        "gate": str(row.get("gate", "")),
        "metric": str(row.get("metric", "")),
        "baseline": row.get("baseline"),
        "candidate": row.get("candidate"),
        "passed": bool(row.get("passed")),
        "reason": str(row.get("reason", "")),
    }


def _review(approval) -> dict:
    return {
        "verdict": approval.verdict,
        "comment": approval.comment,
        "reviewer": approval.reviewer.username,
        "decided_at": approval.decided_at,
    }


def _backtest(backtest) -> dict:
    decision, tally = selectors.backtest_outcome(backtest)
    reviews = sorted((*tally.approvals, *tally.rejections), key=lambda a: (a.decided_at, a.pk))
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
        "task_set_version": task_set_label(
            backtest.task_set_digest, task_set_versions(project=backtest.proposal.project), backtest.task_set_version
        ),
        "task_set_version_number": backtest.task_set_version.number if backtest.task_set_version else None,
        "memory": "now" if backtest.memory_now else "as of each task",
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
            "ablation": decision.ablation,
            "decided_at": decision.decided_at,
        },
        "approval": _review(reviews[-1]) if reviews else None,
        "reviews": [_review(a) for a in reviews],
        "reviews_summary": tally.summary,
        "review_blockers": review_selectors.review_blockers(backtest=backtest) if decision is not None else [],
        "regressed_tasks": [
            {
                "task": r.task,
                "worse": [{"metric": w.metric, "baseline": w.baseline, "candidate": w.candidate} for w in r.worse],
                "diff_url": r.diff_url,
            }
            for r in review_card.regressed_tasks(backtest=backtest)
        ]
        if decision is not None
        else [],
        "shadow": selectors.shadow_document(backtest) if decision is not None else None,
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
def backtest_detail(request, backtest_id: Id, format: Literal["json", "markdown"] = "json"):
    """State and progress while it runs; then the gates with their reasons and per-task deltas.

    `format=markdown`: the pull-request comment instead (text/markdown): per gate pass or regress
    with its interval, the tasks that flipped, the reason codes whose counts changed, tokens, and
    links to the backtest and its trace diffs (docs/ci.md)."""
    backtest = selectors.backtest_by_id(backtest_id=backtest_id)
    access.access_read(request.auth, backtest.proposal.project)
    if format == "markdown":
        site = request.build_absolute_uri("/").rstrip("/")
        return HttpResponse(
            review_markdown.backtest_markdown(backtest, site=site), content_type="text/markdown; charset=utf-8"
        )
    return _backtest(backtest)


@router.post(
    "/backtests/{backtest_id}/reviews",
    response={201: BacktestOut},
    url_name="backtest-review",
    summary="Approve or reject a finished backtest",
)
def backtest_review(request, backtest_id: Id, body: ReviewIn):
    backtest = selectors.backtest_by_id(backtest_id=backtest_id)
    review_services.backtest_review(
        backtest=backtest,
        reviewer=request.auth,
        verdict=body.verdict,
        comment=body.comment,
        acknowledged=body.acknowledged,
    )
    return Status(201, _backtest(selectors.backtest_by_id(backtest_id=backtest_id)))


# --------------------------------------------------------------------------------------------
# Proposals and promotion
# --------------------------------------------------------------------------------------------


# --- frame health ------------------------------------------------------------------------------


class HealthGateOut(Schema):
    gate: str
    metric: str
    limit: float | None
    reference: float = Field(description="the mean of the same tasks at their first reading under this frame version")
    value: float
    passed: bool
    reason: str


class HealthReadingOut(Schema):
    at: datetime
    trigger: str = Field(description="schedule, import, task-set, promotion or manual")
    frame_version: int
    task_set_version: int | None = Field(description="None: the task set as imported")
    task_set_digest: str
    tasks: int
    corpus: str
    corpus_revision: int
    memory_sequence: int | None = Field(None, description="the corpus's memory sequence the reading ran at (as of now)")
    memory_growth: int | None = Field(
        None, description="memory changes since the project's previous reading; null for the first"
    )
    engine_version: str
    primary_metric: str
    means: dict[str, float]
    gates: list[HealthGateOut]
    passed: bool
    transition: str = Field(description='"alert" when a gate started failing, "recovered" when all pass again')


@router.get(
    "/projects/{slug}/health",
    response=list[HealthReadingOut],
    url_name="project-health",
    summary="A project's frame health readings, oldest first (the latest 60)",
)
def project_health(request, slug: Text):
    project = get_object_or_404(Project.objects.select_related("corpus"), slug=slug)
    return [
        {
            "at": row.created_at,
            "trigger": row.trigger,
            "frame_version": row.frame_version.number,
            "task_set_version": row.task_set_version,
            "task_set_digest": row.task_set_digest,
            "tasks": row.tasks,
            "corpus": project.corpus.name,
            "corpus_revision": row.corpus_revision,
            "memory_sequence": row.memory_sequence,
            "memory_growth": row.memory_growth,
            "engine_version": row.engine_version,
            "primary_metric": row.primary_metric,
            "means": row.means,
            "gates": row.gate_results,
            "passed": row.passed,
            "transition": row.transition,
        }
        for row in health_selectors.health_history(project=project, user=request.auth)
    ]
