"""A backtest over tasks that carry `routing:` blocks, through the real Celery worker.

Each task's declared routing inputs (task category, path scope, overlays) are replayed by the
backtest exactly as `evaluate` runs them: the baseline side of the backtest and the evaluation's
C6 run of each task report the same completeness, the same dispositions and the same bundle. A
proposal that changes routing-relevant frame policy changes what the candidate side reports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backtest.models import BacktestStatus, ReplaySide, TaskReplay
from selection.memory import store

from .conftest import wait_finished

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CORPUS = """\
name: rback
description: Routed memory replayed by a backtest.
standpoint: 2026-09-20T12:00:00Z
projects:
  - slug: rback
    name: Routing backtest
    frame:
      scope: [rback]
      work_types:
        implementation-review: [rule, decision, note]
        planning: [note, rule, decision]
      task_categories:
        implementation: {work_types: [implementation-review], load: [rules/output]}
        planning: {work_types: [planning], needs_scope: false}
        debugging: [implementation-review, planning]
      modules:
        rules/output: [r-output]
        areas/storage: [a-storage]
        areas/web: [a-web]
      activation: {areas/web: path}
"""

UNITS = [
    {"id": "r-root", "project": "rback", "class": "rule", "root": True,
     "text": "Root constraint: all migrations must remain deterministic."},
    {"id": "r-output", "project": "rback", "class": "rule", "text": "Output rule: every answer leads with the diff."},
    {"id": "a-storage", "project": "rback", "class": "decision", "paths": ["cli/**/*.py"],
     "text": "Storage area: notes persist as human-readable local JSON files."},
    {"id": "a-web", "project": "rback", "class": "rule", "paths": ["web/*"],
     "text": "Web area: the frontend never stores tokens in local storage."},
    {"id": "n-1", "project": "rback", "class": "note", "text": "Note: the storage migration is planned for next week."},
    {"id": "n-2", "project": "rback", "class": "note", "text": "Note: session tokens expire after one day."},
]  # fmt: skip


def task(uid: str, query: str, work_type: str, routing: str, ledger: str) -> str:
    return f"""\
  - id: {uid}
    project: rback
    query: {query}
    standpoint: 2026-09-20T12:00:00Z
    budget_tokens: 400
    frame:
      objective: {query}
      work_type: {work_type}
    routing: {routing}
    ledger: {ledger}
"""


TASKS = "tasks:\n" + "".join(
    [
        task("t-cli", "Add persistent session storage.", "implementation-review",
             "{task_category: implementation, paths: [cli/store.py]}", "{a-storage: MUST, r-output: MUST}"),
        task("t-web", "Keep tokens out of the browser.", "implementation-review",
             "{task_category: implementation, paths: [web/app.ts, cli/x.py]}", "{a-web: MUST, n-2: SHOULD}"),
        task("t-unscoped", "Change how sessions persist.", "implementation-review",
             "{task_category: implementation}", "{a-storage: MUST}"),
        task("t-plan", "Plan the storage migration.", "planning",
             "{task_category: planning, overlays: [areas/storage]}", "{n-1: MUST, a-storage: SHOULD}"),
        task("t-explicit-web", "Review the frontend tokens.", "implementation-review",
             "{task_category: implementation, overlays: [areas/web]}", "{a-web: MUST}"),
        task("t-debug", "Debug the session store.", "implementation-review",
             "{task_category: debugging, paths: [cli/store.py]}", "{a-storage: MUST}"),
    ]
)  # fmt: skip


def routing_of(trace) -> tuple:
    report = store.trace_result(trace).trace.routing
    return (
        report.completeness,
        tuple((d.unit, d.disposition, d.reason) for d in report.dispositions),
        tuple(c.units for c in report.conflicts),
    )


@pytest.fixture
def rback(db, tmp_path, django_user_model):
    from authority.models import RoleGrant
    from selection.memory.importing import corpus_import
    from selection.models import Project

    directory = tmp_path / "rback"
    directory.mkdir()
    (directory / "corpus.yaml").write_text(CORPUS, encoding="utf-8")
    (directory / "units.jsonl").write_text("".join(json.dumps(u) + "\n" for u in UNITS), encoding="utf-8")
    (directory / "tasks.yaml").write_text(TASKS, encoding="utf-8")
    corpus_import(Path(directory))
    project = Project.objects.get(slug="rback")
    lead = django_user_model.objects.create_user("rback-lead", password="pw")
    RoleGrant.objects.create(user=lead, project=project, role="lead")
    return project, lead


def test_a_backtest_replays_routing_as_evaluate_does_and_sees_a_routing_change(celery_worker_process, rback):
    from governance.proposals.services import proposal_submit
    from selection.evaluation.ladder import evaluation_run
    from selection.models import EvaluationRun

    project, lead = rback
    evaluation = evaluation_run(corpus="rback", conditions="C6")
    evaluated = {
        run.task.uid: run.trace
        for run in EvaluationRun.objects.filter(evaluation=evaluation, condition="C6", variant="declared")
        .select_related("task", "trace")
    }
    assert len(evaluated) == 6
    # what the corpus's routing says, as a user reads it off the evaluation
    completeness = {uid: routing_of(trace)[0] for uid, trace in evaluated.items()}
    assert completeness == {
        "t-cli": "COMPLETE",
        "t-web": "COMPLETE",
        "t-unscoped": "INCOMPLETE",
        "t-plan": "COMPLETE",
        "t-explicit-web": "INVALID",  # areas/web is path-only: an explicit request is refused
        "t-debug": "AMBIGUOUS",
    }

    # the candidate: implementation no longer needs a path scope, and areas/web may be asked for
    submitted = proposal_submit(
        project=project,
        author=lead,
        title="Implementation routes without a scope; the web area on request",
        patch={
            "task_categories": {"implementation": {"needs_scope": False}},
            "activation": {"areas/web": "path-or-explicit"},
        },
    )
    backtest = wait_finished(submitted.backtests.get().pk, timeout=240)
    assert backtest.status == BacktestStatus.FINISHED, backtest.error
    replays = TaskReplay.objects.filter(backtest=backtest).select_related("task", "trace")
    assert replays.count() == 12  # exactly one replay per task and side
    sides = {(r.task.uid, r.side): r.trace for r in replays}

    for uid, trace in evaluated.items():
        baseline = sides[(uid, ReplaySide.BASELINE)]
        assert routing_of(baseline) == routing_of(trace), uid
        assert baseline.bundle_digest == trace.bundle_digest, uid

    candidate = {uid: routing_of(sides[(uid, ReplaySide.CANDIDATE)]) for uid in evaluated}
    assert candidate["t-unscoped"][0] == "COMPLETE"
    assert ("a-storage", "skipped", "SKIP_NOT_REQUESTED") in candidate["t-unscoped"][1]
    assert candidate["t-explicit-web"][0] == "COMPLETE"
    assert ("a-web", "loaded", "ROUTE_EXPLICIT") in candidate["t-explicit-web"][1]
    assert "a-web" in sides[("t-explicit-web", ReplaySide.CANDIDATE)].admitted
    for uid in ("t-cli", "t-web", "t-plan", "t-debug"):  # untouched by the change
        assert candidate[uid] == routing_of(evaluated[uid]), uid
