"""Backtest services on the real PostgreSQL, replays run inline (no worker): enqueue, replay, finish."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from authority.access import AccessDenied
from authority.models import AuditEntry
from authority.states import ProposalState
from backtest import errors as backtest_errors
from backtest import judging, services
from backtest.models import Backtest, BacktestDecision, BacktestStatus, TaskReplay
from backtest.replay import dispatch
from backtest.replay import services as replays
from selection.evaluation.task_sets import task_set_digest
from selection.models import Task, Trace

from .conftest import proposal

pytestmark = pytest.mark.django_db


def run_inline(backtest: Backtest) -> BacktestDecision:
    for task_id in backtest.task_ids:
        for side in dispatch.replay_sides(backtest):
            replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side=side)
    return judging.backtest_finish(backtest_id=backtest.pk)


def test_enqueue_binds_the_backtest_and_queues_the_chord_on_commit(sift, django_capture_on_commit_callbacks):
    target = proposal("looser-stop-rule")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        backtest = services.backtest_enqueue(proposal=target, requested_by=None)
    assert len(callbacks) == 1  # the chord is sent only once the row is committed
    tasks = list(Task.objects.filter(project=sift).order_by("position").values_list("id", flat=True))
    assert backtest.task_ids == tasks and len(tasks) == 10
    assert backtest.baseline_version.number == 1 and backtest.candidate_version == target.frame_version
    assert backtest.condition == "C6" and backtest.status == BacktestStatus.QUEUED
    assert backtest.gates["primary"] == "must_include_recall"
    assert {"metric": "precision", "max_drop": 0.02} in backtest.gates["limits"]
    assert backtest.task_set_digest == task_set_digest(project=sift)
    entry = AuditEntry.objects.get(action="backtest.started")
    assert entry.actor_label == "system" and entry.object_id == str(backtest.pk)
    target.refresh_from_db()
    assert target.state == ProposalState.BACKTESTING


def test_the_task_set_digest_follows_queries_and_ledgers(sift):
    before = task_set_digest(project=sift)
    assert before == task_set_digest(project=sift)
    task = Task.objects.filter(project=sift).order_by("position").first()
    Task.objects.filter(pk=task.pk).update(query=task.query + " (reworded)")
    assert task_set_digest(project=sift) != before


def test_replaying_the_same_task_twice_writes_one_result(sift):
    backtest = services.backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=None)
    task_id = backtest.task_ids[0]
    first = replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side="candidate")
    traces = Trace.objects.count()
    with CaptureQueriesContext(connection) as queries:
        again = replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side="candidate")
    assert again.pk == first.pk
    assert TaskReplay.objects.filter(backtest=backtest).count() == 1
    assert Trace.objects.count() == traces
    assert not [q for q in queries.captured_queries if q["sql"].startswith(("INSERT", "UPDATE"))]
    trace = first.trace
    assert trace.source == "backtest" and trace.task_id == task_id
    assert trace.frame_version == backtest.candidate_version.number == 4
    assert set(first.metrics) >= {"must_include_recall", "precision", "harmful_admission", "leakage"}
    backtest.refresh_from_db()
    assert backtest.status == BacktestStatus.RUNNING


def test_a_replay_outside_the_backtest_is_refused(sift, context_lab):
    backtest = services.backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=None)
    other = Task.objects.exclude(project=sift).first()
    with pytest.raises(backtest_errors.BacktestError, match="not in backtest"):
        replays.replay_one(backtest_id=backtest.pk, task_id=other.pk, side="baseline")
    with pytest.raises(backtest_errors.BacktestError, match='unknown side "both"'):
        replays.replay_one(backtest_id=backtest.pk, task_id=backtest.task_ids[0], side="both")


def test_finish_judges_every_gate_once_and_audits_it(sift):
    target = proposal("report-prose-in-design-review")
    backtest = services.backtest_enqueue(proposal=target, requested_by=None)
    with pytest.raises(backtest_errors.BacktestError, match="lacks 20 replays"):
        judging.backtest_finish(backtest_id=backtest.pk)
    decision = run_inline(backtest)
    assert [g["metric"] for g in decision.gate_results] == [
        "must_include_recall", "precision", "harmful_admission", "leakage",
    ]  # fmt: skip
    assert all(g["reason"] for g in decision.gate_results)
    assert decision.passed == all(g["passed"] for g in decision.gate_results)
    assert len(decision.per_task_deltas) == 10
    row = decision.per_task_deltas[0]
    assert set(row) == {"task", "task_id", "baseline", "candidate", "delta"}
    assert row["task_id"] == backtest.task_ids[0]
    backtest.refresh_from_db()
    assert backtest.status == BacktestStatus.FINISHED and backtest.finished_at
    finished = AuditEntry.objects.get(action="backtest.finished")
    assert finished.payload["passed"] == decision.passed
    assert ("passed" if decision.passed else "failed") in finished.summary
    target.refresh_from_db()
    assert target.state == (ProposalState.PASSED if decision.passed else ProposalState.FAILED)
    # finishing again (a redelivered chord callback) writes nothing
    assert judging.backtest_finish(backtest_id=backtest.pk).pk == decision.pk
    assert AuditEntry.objects.filter(action="backtest.finished").count() == 1


def test_a_lead_proposing_starts_a_backtest_and_others_cannot(sift, sift_users, django_capture_on_commit_callbacks):
    from governance.proposals.services import proposal_submit

    patch = {"class_pull": 4}
    for name in ("reviewer", "auditor"):
        with pytest.raises(AccessDenied):
            proposal_submit(project=sift, author=sift_users[name], title="t", patch=patch)
        with pytest.raises(AccessDenied):
            services.backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=sift_users[name])
    assert not Backtest.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        with django_capture_on_commit_callbacks(execute=False) as chord:
            submitted = proposal_submit(project=sift, author=sift_users["lead"], title="Pull four", patch=patch)
    backtest = Backtest.objects.get(proposal=submitted)
    assert backtest.requested_by == sift_users["lead"]
    assert len(chord) == 1


def test_a_broker_failure_marks_the_backtest_errored(sift, monkeypatch, django_capture_on_commit_callbacks):

    def refuse(backtest_id):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(services, "launch_chord", refuse)
    target = proposal("looser-stop-rule")
    with django_capture_on_commit_callbacks(execute=True):
        backtest = services.backtest_enqueue(proposal=target, requested_by=None)
    backtest.refresh_from_db()
    assert backtest.status == BacktestStatus.ERROR
    assert "broker unreachable" in backtest.error
    assert AuditEntry.objects.filter(action="backtest.failed", object_id=str(backtest.pk)).exists()
    target.refresh_from_db()
    assert target.state == ProposalState.PROPOSED


def test_a_replay_that_loses_a_race_rolls_back_its_trace(sift, monkeypatch):
    backtest = services.backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=None)
    task_id = backtest.task_ids[0]
    real_select = replays._select
    rival = {}

    def select_while_a_rival_commits(context, frame, condition, index):
        # another worker got the same message (acks_late redelivery) and commits first
        if not rival:
            rival["started"] = True
            rival["replay"] = replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side="baseline")
        return real_select(context, frame, condition, index)

    monkeypatch.setattr(replays, "_select", select_while_a_rival_commits)
    traces = Trace.objects.count()
    replay = replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side="baseline")
    assert replay.pk == rival["replay"].pk
    assert TaskReplay.objects.filter(backtest=backtest).count() == 1
    assert Trace.objects.count() == traces + 1  # the rival's trace only; ours rolled back with its row


def test_a_frame_that_names_a_builder_is_backtested_through_it(sift, sift_users):
    from governance.proposals.services import proposal_submit

    submitted = proposal_submit(
        project=sift,
        author=sift_users["lead"],
        title="Establish work frames by similarity",
        rationale="agents rarely declare a work type",
        patch={"establishment": {"builder": "similarity", "thresholds": {"similarity": {"margin": 0.05}}}},
    )
    backtest = services.backtest_enqueue(proposal=submitted, requested_by=None)
    task_id = backtest.task_ids[0]
    baseline = replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side="baseline")
    candidate = replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side="candidate")
    assert baseline.trace.header["work_frame"]["builder"] == "declared"
    built = candidate.trace.header["work_frame"]
    assert built["builder"] == "similarity" and built["establishment"] != "declared"
    assert candidate.trace.header["project_frame"]["establishment"]["builder"] == "similarity"
