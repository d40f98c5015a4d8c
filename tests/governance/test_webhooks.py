"""Signed webhooks: a lead configures them per project; each event of the audit
log becomes a delivery, POSTed with an HMAC-SHA256 signature of its body, every attempt recorded."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from django.urls import reverse

from authority.access import AccessDenied
from authority.errors import InputRefused
from authority.models import AuditEntry
from governance.models import WebhookDelivery
from governance.webhooks import services as webhooks
from tests.receiver import Receiver

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_webhooks")]


def test_a_lead_adds_a_webhook_and_bad_input_is_refused(project, users):
    with pytest.raises(AccessDenied):
        webhooks.webhook_create(
            project=project, lead=users["reviewer"], url="http://x.test/h", events=["proposal.promoted"]
        )
    with pytest.raises(InputRefused, match="is not an http"):
        webhooks.webhook_create(project=project, lead=users["lead"], url="ftp://x.test/h", events=["proposal.promoted"])
    with pytest.raises(InputRefused, match="nonsense unknown"):
        webhooks.webhook_create(project=project, lead=users["lead"], url="http://x.test/h", events=["nonsense"])
    endpoint = webhooks.webhook_create(
        project=project, lead=users["lead"], url="http://x.test/h", events=["proposal.submitted"]
    )
    assert len(endpoint.secret) == 64 and AuditEntry.objects.get(action="webhook.created").actor == users["lead"]


def test_an_event_is_delivered_signed_and_a_failure_is_recorded_until_it_gives_up(
    project, users, submit, django_capture_on_commit_callbacks
):
    with Receiver(statuses=(200,)) as ok, Receiver(statuses=(500,)) as down:
        good = webhooks.webhook_create(project=project, lead=users["lead"], url=ok.url, events=["proposal.submitted"])
        webhooks.webhook_create(project=project, lead=users["lead"], url=down.url, events=["proposal.submitted"])
        webhooks.webhook_create(project=project, lead=users["lead"], url=ok.url, events=["proposal.promoted"])
        with django_capture_on_commit_callbacks() as queued:
            proposal = submit(title="Rules first")
        deliveries = list(WebhookDelivery.objects.order_by("pk"))
        # the endpoint that wants only promotions gets nothing
        assert [d.event for d in deliveries] == ["proposal.submitted", "proposal.submitted"]
        assert len(queued) >= 2  # each delivery is queued when the proposal commits

        assert webhooks.webhook_attempt(delivery_id=deliveries[0].pk)
        sent = ok.requests[0]
        expected = "sha256=" + hmac.new(good.secret.encode(), sent["body"], hashlib.sha256).hexdigest()
        assert sent["headers"]["x-fg-signature"] == expected and sent["headers"]["x-fg-event"] == "proposal.submitted"
        body = json.loads(sent["body"])
        assert (body["project"], body["actor"], body["data"]["frame_version"]) == ("alpha", "lead", 2)
        assert body["object"] == {"type": "proposal", "id": str(proposal.pk)}
        delivered = WebhookDelivery.objects.get(pk=deliveries[0].pk)
        assert (delivered.status, delivered.attempts, delivered.last_status_code) == ("delivered", 1, 200)

        for attempt in range(1, webhooks.MAX_ATTEMPTS + 1):
            done = webhooks.webhook_attempt(delivery_id=deliveries[1].pk)
            assert done == (attempt == webhooks.MAX_ATTEMPTS)
        failed = WebhookDelivery.objects.get(pk=deliveries[1].pk)
        assert (failed.status, failed.attempts, failed.last_error) == ("failed", 5, "HTTP 500")
        assert len(down.requests) == 5


def test_the_webhooks_page_is_the_leads_and_logs_every_delivery(client, project, users, submit):
    client.force_login(users["reviewer"])
    assert client.get(reverse("project-webhooks", args=["alpha"])).status_code == 403
    client.force_login(users["lead"])
    page = reverse("project-webhooks", args=["alpha"])
    refused = client.post(page, {"url": "not a url", "events": ["proposal.submitted"]})
    assert refused.status_code == 400 and "is not an https or http URL" in refused.content.decode()
    client.post(page, {"url": "http://127.0.0.1:9/hook", "events": ["proposal.submitted"]})
    submit()
    html = client.get(page).content.decode()
    assert "http://127.0.0.1:9/hook" in html and 'data-delivery="' in html and "pending" in html
