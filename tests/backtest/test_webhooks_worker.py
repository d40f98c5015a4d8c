"""A webhook against a real Celery worker and a local HTTP receiver: the receiver refuses the first
attempt, the worker retries it after the backoff, and the delivery log records both attempts."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest

from governance.models import WebhookDelivery
from governance.proposals import services
from governance.webhooks import services as webhooks
from tests.receiver import Receiver

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_webhooks")]

FRAME = {"purpose": "p", "scope": ["hooks"], "default_classes": ["rule"], "work_types": {"review": ["rule"]}}


def test_the_worker_delivers_a_signed_event_and_retries_with_backoff(
    celery_worker_process, make_project, django_user_model
):
    from authority.models import RoleGrant

    project = make_project("hooks", corpus="hooks-lab", frame=FRAME)  # no task: no backtest to wait for
    lead = django_user_model.objects.create_user("hook-lead")
    RoleGrant.objects.create(user=lead, project=project, role="lead")
    with Receiver(statuses=(503, 200)) as receiver:
        endpoint = webhooks.webhook_create(project=project, lead=lead, url=receiver.url, events=["proposal.submitted"])
        services.proposal_submit(project=project, author=lead, title="Pull more", patch={"class_pull": 4})
        deadline = time.monotonic() + 60
        while len(receiver.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
    assert len(receiver.requests) == 2, WebhookDelivery.objects.values()
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 2, 200)
    body = receiver.requests[1]["body"]
    signed = "sha256=" + hmac.new(endpoint.secret.encode(), body, hashlib.sha256).hexdigest()
    assert receiver.requests[1]["headers"]["x-fg-signature"] == signed
