"""End to end through a real Celery worker process: enqueue, chord of replays, decision, CLI."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from authority.models import AuditEntry
from authority.states import ProposalState
from backtest import services
from backtest.models import BacktestStatus, TaskReplay
from backtest.replay import dispatch
from backtest.replay import services as replays

from .conftest import proposal, wait_finished

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CONTEXT_LAB_PROPOSALS = (
    "report-prose-in-design-review",
    "protocol-in-config-repair",
    "looser-stop-rule",
    "all-three",
)


def test_the_four_context_lab_proposals_are_judged_by_the_worker(celery_worker_process, sift):
    backtests = {
        uid: services.backtest_enqueue(proposal=proposal(uid), requested_by=None) for uid in CONTEXT_LAB_PROPOSALS
    }
    for uid, backtest in backtests.items():
        backtest = wait_finished(backtest.pk)
        assert backtest.status == BacktestStatus.FINISHED, backtest.error
        decision = backtest.decision
        assert [g["metric"] for g in decision.gate_results] == [
            "must_include_recall", "precision", "harmful_admission", "leakage",
        ]  # fmt: skip
        assert all(g["reason"] for g in decision.gate_results)
        assert decision.passed == all(g["passed"] for g in decision.gate_results)
        assert TaskReplay.objects.filter(backtest=backtest).count() == 20
        target = proposal(uid)
        assert target.state == (ProposalState.PASSED if decision.passed else ProposalState.FAILED)
    assert AuditEntry.objects.filter(action="backtest.finished").count() == 4


def test_a_lead_proposing_gets_a_backtest_the_worker_finishes(celery_worker_process, sift, sift_users):
    from governance.proposals.services import proposal_submit

    submitted = proposal_submit(
        project=sift, author=sift_users["lead"], title="Pull four per class", patch={"class_pull": 4}
    )
    backtest = submitted.backtests.get()
    assert backtest.requested_by == sift_users["lead"]
    backtest = wait_finished(backtest.pk)
    assert backtest.status == BacktestStatus.FINISHED, backtest.error
    actions = list(AuditEntry.objects.filter(project=sift).order_by("at", "id").values_list("action", flat=True))
    assert actions[-3:] == ["proposal.submitted", "backtest.started", "backtest.finished"]


def test_the_cli_runs_a_backtest_through_the_worker_and_writes_json(celery_worker_process, sift, tmp_path, capsys):
    out = tmp_path / "decision.json"
    # one live selection, for the shadow replay
    call_command("select", project="sift", query="Does the hybrid ranking design hold up?", work_type="design-review")
    capsys.readouterr()
    call_command(
        "backtest", "context-lab", "--proposal", "looser-stop-rule", "--json", str(out), "--timeout", "180",
        "--shadow", "5",
    )  # fmt: skip
    printed = capsys.readouterr()
    doc = json.loads(out.read_text())
    assert doc["proposal"]["uid"] == "looser-stop-rule"
    assert doc["baseline_version"] == 1 and doc["candidate_version"] == 4
    assert doc["decision"] in ("passed", "failed")
    assert doc["primary"]["metric"] == "must_include_recall"
    assert doc["primary"]["delta"] == pytest.approx(doc["primary"]["candidate"] - doc["primary"]["baseline"])
    assert len(doc["gates"]) == 4 and len(doc["tasks"]) == 10
    for gate in doc["gates"]:
        assert gate["reason"] in printed.out
    assert doc["decision"].upper() in printed.out
    # its two parts (stop rule, design review) each alone: 10 tasks on 4 sides, and 1 selection
    assert "41/41" in printed.err  # the progress bar reached the end
    assert [row["part"] for row in doc["ablation"]] == ["admission", "work_types.design-review"]
    assert all(set(row) >= {"alone", "marginal", "flagged", "hurt_tasks"} for row in doc["ablation"])
    assert "ablation:" in printed.out
    assert doc["shadow"]["requested"] == 5 and doc["shadow"]["replayed"] == 1
    assert doc["shadow"]["summary"] in printed.out and "recent bundles" in doc["shadow"]["summary"]


def test_the_cli_refuses_without_a_worker_on_its_queue(sift, settings):
    from django.core.management import CommandError

    settings.CELERY_TASK_DEFAULT_QUEUE = "fg-nobody-listens-here"
    with pytest.raises(CommandError, match="start one with `make worker`"):
        call_command("backtest", "context-lab", "--proposal", "looser-stop-rule")
    assert not proposal("looser-stop-rule").backtests.exists()


def test_a_replay_failing_for_good_ends_the_backtest_in_error(celery_worker_process, sift):
    from backtest.models import Backtest
    from backtest.services import launch_chord

    target = proposal("looser-stop-rule")
    first = services.backtest_enqueue(proposal=target, requested_by=None)
    wait_finished(first.pk)
    # the same backtest, but one task id names no task: its replays raise and are not retried
    broken = Backtest.objects.create(
        proposal=target,
        baseline_version=first.baseline_version,
        candidate_version=first.candidate_version,
        task_ids=[first.task_ids[0], 2**40],
        task_set_digest=first.task_set_digest,
        engine_version=first.engine_version,
        gates=first.gates,
    )
    launch_chord(broken.pk)
    broken = wait_finished(broken.pk, timeout=60)
    assert broken.status == BacktestStatus.ERROR
    assert broken.error == "a task replay failed after its retries"
    assert AuditEntry.objects.filter(action="backtest.failed", object_id=str(broken.pk)).exists()
    assert proposal("looser-stop-rule").state == ProposalState.PROPOSED


def test_the_worker_replays_in_chunks_and_judges_as_replays_one_at_a_time_do(celery_worker_process, sift):
    from backtest.models import AblationReplay

    target = proposal("all-three")  # ablated: its variants are sides of the chunks too
    on_worker = services.backtest_enqueue(proposal=target, requested_by=None)
    on_worker = wait_finished(on_worker.pk)
    assert on_worker.status == BacktestStatus.FINISHED, on_worker.error
    pairs = len(on_worker.task_ids) * len(dispatch.replay_sides(on_worker))
    assert len(dispatch.replay_chunks(on_worker)) > 1  # more than one task for the worker
    stored = TaskReplay.objects.filter(backtest=on_worker).count()
    assert stored + AblationReplay.objects.filter(backtest=on_worker).count() == pairs
    # the same backtest replayed here one pair at a time, every pair selected again
    again = services.backtest_enqueue(proposal=target, requested_by=None)
    # the worker may run the third backtest's chunks while this loop does: each pair is stored once
    for task_id in again.task_ids:
        for side in dispatch.replay_sides(again):
            replays.replay_many(backtest_id=again.pk, pairs=[(task_id, side)], reuse_baseline=False)
    again = wait_finished(again.pk)

    def judged(backtest):
        d = backtest.decision
        return d.passed, d.gate_results, d.baseline_means, d.candidate_means, d.per_task_deltas, d.ablation

    assert judged(again) == judged(on_worker)
    metrics = {
        b.pk: {(t, s): m for t, s, m in TaskReplay.objects.filter(backtest=b).values_list("task_id", "side", "metrics")}
        for b in (on_worker, again)
    }
    assert metrics[on_worker.pk] == metrics[again.pk]
