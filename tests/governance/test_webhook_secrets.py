"""A webhook's secret is shown once, when it is made (added, or rotated), and masked on every page
and API answer after that; rotating it is the lead's, audited, and signs the next delivery."""

from __future__ import annotations

import hashlib
import hmac
import json
import re

import pytest
from django.urls import reverse

from authority.models import AuditEntry
from governance.models import WebhookDelivery, WebhookEndpoint
from governance.tokens import services as tokens
from governance.webhooks import services as webhooks
from tests.receiver import Receiver

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_webhooks")]

URL = "https://hooks.example.com/fg"


def _bearer(user, project, role="lead"):
    secret = tokens.token_create(user=user, name="t", project=project, role=role).secret
    return {"Authorization": f"Bearer {secret}"}


def test_the_page_shows_a_new_secret_once_then_masked(client, project, users):
    client.force_login(users["lead"])
    page = reverse("project-webhooks", args=[project.slug])
    created = client.post(page, {"url": URL, "events": ["proposal.submitted"]})
    assert created.status_code == 200
    shown = re.search(r'<code id="webhook-secret">([0-9a-f]{64})</code>', created.content.decode()).group(1)
    endpoint = WebhookEndpoint.objects.get()
    assert shown == endpoint.secret
    again = client.get(page).content.decode()
    assert endpoint.secret not in again and "webhook-secret" not in again
    assert f"••••{endpoint.secret[-4:]}" in again
    # the audit log never holds it
    for entry in AuditEntry.objects.all():
        assert endpoint.secret not in json.dumps(entry.payload) + entry.summary


def test_the_api_answers_the_secret_once_and_masks_it_after(client, project, users):
    headers = _bearer(users["lead"], project)
    api = f"/api/v1/projects/{project.slug}/webhooks"
    made = client.post(
        api, {"url": URL, "events": ["proposal.promoted"]}, content_type="application/json", headers=headers
    )
    assert made.status_code == 201, made.content
    secret = made.json()["secret"]
    assert len(secret) == 64 and secret == WebhookEndpoint.objects.get().secret
    listed = client.get(api, headers=headers).json()
    assert listed["webhooks"][0]["secret"] == f"••••{secret[-4:]}" and secret not in json.dumps(listed)
    refused = client.post(
        api,
        {"url": "http://10.0.0.1/", "events": ["proposal.promoted"]},
        content_type="application/json",
        headers=headers,
    )
    assert refused.status_code == 422 and refused.json()["errors"][0]["location"] == ["body", "url"]
    # a reviewer's token may not read the secrets' endpoints
    reviewer = _bearer(users["reviewer"], project, role="reviewer")
    assert client.get(api, headers=reviewer).status_code == 403


def test_rotating_a_secret_is_audited_and_signs_the_next_delivery(client, project, users, submit):
    with Receiver() as receiver:
        issued = webhooks.webhook_create(
            project=project, lead=users["lead"], url=receiver.url, events=["proposal.submitted"]
        )
        endpoint = issued.endpoint
        headers = _bearer(users["lead"], project)
        rotate = f"/api/v1/projects/{project.slug}/webhooks/{endpoint.pk}/secret"
        assert client.post(rotate, headers=_bearer(users["reviewer"], project, role="reviewer")).status_code == 403
        assert (
            client.post(f"/api/v1/projects/{project.slug}/webhooks/999999/secret", headers=headers).status_code == 404
        )
        answered = client.post(rotate, headers=headers)
        assert answered.status_code == 200
        by_api = answered.json()["secret"]
        assert by_api != issued.secret and len(by_api) == 64

        # the page's button rotates it again and shows the new one once
        client.force_login(users["lead"])
        page = client.post(reverse("project-webhook-rotate", args=[project.slug, endpoint.pk]))
        by_page = re.search(r'<code id="webhook-secret">([0-9a-f]{64})</code>', page.content.decode()).group(1)
        assert by_page not in (by_api, issued.secret)
        rotations = AuditEntry.objects.filter(action="webhook.secret_rotated").order_by("pk")
        assert [e.actor for e in rotations] == [users["lead"], users["lead"]]
        assert all(s not in json.dumps(e.payload) + e.summary for e in rotations for s in (by_api, by_page))

        submit()
        delivery = WebhookDelivery.objects.get()
        assert webhooks.webhook_attempt(delivery_id=delivery.pk)
        sent = receiver.requests[0]
    expected = "sha256=" + hmac.new(by_page.encode(), sent["body"], hashlib.sha256).hexdigest()
    assert sent["headers"]["x-fg-signature"] == expected
