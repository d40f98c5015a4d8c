"""Frame health on a real Celery worker: an import queues a reading of each project it creates, a
labelled task one of its project, and the daily beat entry's task, run by the worker, reads every
project and delivers a signed `health.alert` to a local HTTP receiver when a gate starts failing."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest

from authority.selectors import current_frame_version
from authority.services import frame_version_create, promotion_create
from backtest.health import services as health
from backtest.models import FrameHealth
from config.celery import app
from governance.models import WebhookDelivery
from governance.webhooks import services as webhooks
from selection.models import Task, TraceCandidate
from selection.serving.selections import replay_task
from selection.traces import labelling
from tests.receiver import Receiver

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_webhooks")]

PROJECTS = {"sift", "quill", "patchwork"}


@pytest.fixture
def health_on(settings):
    """Readings on import, task-set change and promotion, as in production (off elsewhere in tests)."""
    settings.FG_HEALTH_ON_CHANGE = True


def _wait(what, done, timeout=300.0):
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.5)


def _idle(worker) -> bool:
    """Nothing queued, reserved or running on the session's worker."""
    with app.connection_for_write() as connection:
        queued = connection.default_channel.client.llen(worker["queue"])
    inspect = app.control.inspect(destination=[worker["hostname"]], timeout=1.0)
    host = worker["hostname"]
    busy = [*(inspect.active() or {}).get(host, []), *(inspect.reserved() or {}).get(host, [])]
    return queued == 0 and not busy


def test_an_import_and_the_daily_run_read_health_on_the_worker_and_alert_once(
    health_on, celery_worker_process, sift, sift_users, settings
):
    # the import queued one reading of each project it created, on commit; the worker took them
    _wait("the import's readings", lambda: FrameHealth.objects.filter(trigger="import").count() == 3)
    readings = FrameHealth.objects.filter(trigger="import").select_related("project")
    assert {r.project.slug for r in readings} == PROJECTS
    assert all(r.passed and r.transition == "" for r in readings)

    lead = sift_users["lead"]
    first = FrameHealth.objects.get(project=sift)
    # a reviewer turns a live selection into a task: the task set's change queues a reading too
    selection = replay_task(task=Task.objects.filter(project=sift).first(), source="api")
    unit = TraceCandidate.objects.filter(trace=selection.trace).order_by("position").first().unit_uid
    labelled = labelling.trace_label(trace=selection.trace, user=sift_users["reviewer"], labels={unit: "MUST"})
    _wait("the task set's reading", lambda: FrameHealth.objects.filter(trigger="task-set").exists())
    changed = FrameHealth.objects.get(trigger="task-set")
    assert changed.project_id == sift.pk and changed.task_set_version == labelled.version.number == 2
    assert changed.tasks == first.tasks + 1 and changed.passed  # a new task is its own reference
    with Receiver() as receiver:
        endpoint = webhooks.webhook_create(project=sift, lead=lead, url=receiver.url, events=["health.alert"])
        # the project declares a floor its frame does not reach; no reading is taken yet
        settings.FG_HEALTH_ON_CHANGE = False
        gates = first.frame_version.snapshot["gates"]
        floor = round(min(1.0, first.means["precision"] + 0.1), 3)
        limits = [*gates["limits"], {"metric": "precision", "min": floor}]
        strict = _promote_gates(sift, lead, {**gates, "limits": limits})
        # the beat entry's task, as `celery beat` sends it each day
        entry = settings.CELERY_BEAT_SCHEDULE["frame-health"]
        assert entry["task"] == health.DAILY_TASK
        app.send_task(entry["task"], kwargs={"day": "2026-12-01"})
        _wait("the daily readings", lambda: FrameHealth.objects.filter(trigger="schedule").count() == 3)
        _wait("the alert's delivery", lambda: len(receiver.requests) == 1, timeout=60)
        # the same day again: every reading is there already, nothing is read or sent twice
        app.send_task(entry["task"], kwargs={"day": "2026-12-01"})
        # twice, a second apart: the daily task fans out before it ends
        _wait(
            "the worker to be idle",
            lambda: _idle(celery_worker_process) and time.sleep(1) is None and _idle(celery_worker_process),
            timeout=120,
        )
        assert FrameHealth.objects.filter(trigger="schedule").count() == 3
    daily = FrameHealth.objects.get(project=sift, trigger="schedule")
    assert daily.task_set_version == 2
    assert not daily.passed and daily.transition == "alert"
    assert FrameHealth.objects.filter(trigger="schedule", passed=True).count() == 2  # quill, patchwork
    [request] = receiver.requests
    body = request["body"]
    assert request["headers"]["x-fg-event"] == "health.alert"
    signed = "sha256=" + hmac.new(endpoint.secret.encode(), body, hashlib.sha256).hexdigest()
    assert request["headers"]["x-fg-signature"] == signed
    payload = json.loads(body)
    assert payload["project"] == "sift" and payload["data"]["failing"] == ["precision min"]
    assert daily.frame_version == strict
    assert payload["data"]["frame_version"] == strict.number and payload["data"]["trigger"] == "schedule"
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("delivered", 1)


def _promote_gates(project, lead, gates):
    current = current_frame_version(project=project)
    version = frame_version_create(
        project=project, snapshot={**current.snapshot, "gates": gates}, parent=current, author=lead, origin="proposal"
    )
    promotion_create(project=project, frame_version=version, promoted_by=lead)
    return version
