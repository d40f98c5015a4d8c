"""Backtests cannot hang: stale jobs fail with their reason, a lead re-runs them, a crashing
replay is not redelivered forever, and finished rows (and submitted proposals) never change."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from authority.models import AuditEntry
from backtest import errors as backtest_errors
from backtest import judging, services
from backtest.models import Backtest, BacktestStatus
from governance.models import Proposal

from .conftest import proposal

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(sift, sift_users, django_capture_on_commit_callbacks):
    """A backtest of a context-lab proposal, queued but never sent (no broker call on commit)."""
    with django_capture_on_commit_callbacks(execute=False):
        return services.backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=None)


def no_progress_for_too_long(settings):
    """The stale rule's limit drops below the time since the backtest was queued."""
    settings.FG_BACKTEST_STALE_SECONDS = 0


def refused(sql_change):
    with pytest.raises(IntegrityError), transaction.atomic():
        sql_change()


def test_a_backtest_without_progress_is_marked_failed_on_page_load(client, queued, sift_users, settings):
    client.force_login(sift_users["auditor"])
    page = client.get(reverse("backtest-detail", args=[queued.pk])).content.decode()
    assert 'data-status="queued"' in page and "hx-trigger" in page  # still polling
    no_progress_for_too_long(settings)

    page = client.get(reverse("backtest-live", args=[queued.pk])).content.decode()
    backtest = Backtest.objects.get(pk=queued.pk)
    assert backtest.status == BacktestStatus.ERROR
    assert backtest.error.startswith("stale: no replay for ")
    assert "its workers vanished or its messages were lost" in page
    assert "hx-trigger" not in page  # the live page stops polling once the job has failed
    assert AuditEntry.objects.filter(action="backtest.failed", object_id=str(queued.pk)).exists()
    assert "Run this backtest again" not in page  # an auditor may not


def test_a_lead_reruns_a_failed_backtest_from_its_page(
    client, queued, sift_users, settings, django_capture_on_commit_callbacks
):
    no_progress_for_too_long(settings)
    client.force_login(sift_users["lead"])
    page = client.get(reverse("backtest-detail", args=[queued.pk])).content.decode()
    assert "Run this backtest again" in page
    with django_capture_on_commit_callbacks(execute=False) as sent:
        response = client.post(reverse("backtest-rerun", args=[queued.pk]))
    again = Backtest.objects.exclude(pk=queued.pk).get()
    assert response.status_code == 302 and response["Location"] == reverse("backtest-detail", args=[again.pk])
    assert again.status == BacktestStatus.QUEUED and again.requested_by == sift_users["lead"]
    assert len(sent) == 1  # its replays are sent on commit
    # the failed one stays as it was; re-running it again is refused: a newer one exists
    with pytest.raises(backtest_errors.BacktestRefused, match="newer"):
        services.backtest_rerun(backtest=Backtest.objects.get(pk=queued.pk), lead=sift_users["lead"])


def test_only_a_lead_may_rerun_and_only_a_failed_backtest(client, queued, sift_users):
    client.force_login(sift_users["reviewer"])
    assert client.post(reverse("backtest-rerun", args=[queued.pk])).status_code == 403
    with pytest.raises(backtest_errors.BacktestRefused, match="only a failed or stale backtest"):
        services.backtest_rerun(backtest=queued, lead=sift_users["lead"])
    assert Backtest.objects.count() == 1


def test_a_replay_that_keeps_killing_its_worker_fails_the_backtest(queued):
    from config.celery import app

    task_id = queued.task_ids[0]
    kwargs = dict(backtest_id=queued.pk, task_id=task_id, side="baseline", retries=0)
    app.backend.client.delete(f"fg:replay-deliveries:{queued.pk}:{task_id}:baseline:0")
    assert [judging.replay_delivery_allowed(app, **kwargs) for _ in range(judging.MAX_REPLAY_DELIVERIES)] == [
        True
    ] * judging.MAX_REPLAY_DELIVERIES
    assert judging.replay_delivery_allowed(app, **kwargs) is False
    backtest = Backtest.objects.get(pk=queued.pk)
    assert backtest.status == BacktestStatus.ERROR
    assert "was delivered 3 times and its worker died each time" in backtest.error


def test_a_finished_backtest_row_is_immutable_and_status_moves_forward(queued):
    Backtest.objects.filter(pk=queued.pk).update(status=BacktestStatus.RUNNING)
    refused(lambda: Backtest.objects.filter(pk=queued.pk).update(status=BacktestStatus.QUEUED))
    refused(lambda: Backtest.objects.filter(pk=queued.pk).update(gates={"primary": "precision"}))
    refused(lambda: Backtest.objects.filter(pk=queued.pk).update(task_ids=[]))
    refused(lambda: Backtest.objects.filter(pk=queued.pk).update(task_set_digest="0" * 64))
    refused(lambda: Backtest.objects.filter(pk=queued.pk).update(ablation={"parts": ["scope"]}))
    refused(lambda: Backtest.objects.filter(pk=queued.pk).update(shadow={"requested": 99}))
    judging.backtest_fail(backtest_id=queued.pk, error="stopped by the test")
    refused(lambda: Backtest.objects.filter(pk=queued.pk).update(status=BacktestStatus.FINISHED))
    refused(lambda: Backtest.objects.filter(pk=queued.pk).update(error=""))
    refused(lambda: Backtest.objects.filter(pk=queued.pk).delete())
    assert Backtest.objects.get(pk=queued.pk).error == "stopped by the test"


def test_a_submitted_proposals_patch_and_base_are_immutable(queued):
    target = Proposal.objects.get(pk=queued.proposal_id)
    refused(lambda: Proposal.objects.filter(pk=target.pk).update(patch={"class_pull": 9}))
    refused(lambda: Proposal.objects.filter(pk=target.pk).update(base_version=target.frame_version))
    refused(lambda: Proposal.objects.filter(pk=target.pk).delete())
    Proposal.objects.filter(pk=target.pk).update(state="passed")  # the read-model may move
