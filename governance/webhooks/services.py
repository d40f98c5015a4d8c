"""Notifications out: signed webhooks per project, configured by a lead, fed by the audit log.

Every write already records an audit row in its own transaction; `on_audit` (registered with
authority.audit at start-up) turns the rows of the events below into one WebhookDelivery per
endpoint that wants them, and queues each on commit. `webhook_attempt` makes one POST, signed
`X-FG-Signature: sha256=<hex HMAC-SHA256 of the body under the endpoint's secret>`; the Celery task
(governance.tasks) retries it with exponential backoff and gives up after MAX_ATTEMPTS, and every
attempt is recorded on the delivery, which the project's webhooks page lists.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from celery import current_app
from django.db import transaction
from django.utils import timezone

from authority import access
from authority.audit import audit_record, register_audit_listener
from authority.errors import InputRefused
from selection.models import Project

from ..models import WebhookDelivery, WebhookDeliveryStatus, WebhookEndpoint

# audit action -> webhook event
EVENTS = {
    "proposal.submitted": "proposal.submitted",
    "backtest.finished": "backtest.finished",
    "backtest.approved": "proposal.approved",
    "backtest.rejected": "proposal.rejected",
    "proposal.promoted": "proposal.promoted",
    "health.alert": "health.alert",  # a gate of the promoted frame fails now (backtest.health)
    "health.recovered": "health.recovered",  # every gate passes again after an alert
}
EVENT_NAMES = tuple(sorted(set(EVENTS.values())))
MAX_ATTEMPTS = 5
TIMEOUT_SECONDS = 10
DELIVER_TASK = "governance.deliver_webhook"


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_create(*, project: Project, lead, url: str, events: list[str]) -> WebhookEndpoint:
    """A lead adds an endpoint; its secret is generated here and shown on the webhooks page."""
    access.access_webhooks(lead, project)
    url = (url or "").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputRefused(f'"{url}" is not an http(s) URL', field=("url",))
    unknown = sorted(set(events) - set(EVENT_NAMES))
    if unknown or not events:
        raise InputRefused(
            f"events: choose among {', '.join(EVENT_NAMES)}" + (f" ({', '.join(unknown)} unknown)" if unknown else ""),
            field=("events",),
        )
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(
            project=project, url=url, secret=secrets.token_hex(32), events=sorted(set(events)), created_by=lead
        )
        audit_record(
            actor=lead, project=project, action="webhook.created", obj=endpoint,
            summary=f"webhook to {url} for {', '.join(endpoint.events)}",
            payload={"url": url, "events": endpoint.events},
        )
    return endpoint


def on_audit(entry) -> None:
    """authority.audit's listener: a delivery per endpoint that wants this event, sent on commit."""
    event = EVENTS.get(entry.action)
    if event is None or entry.project_id is None:
        return
    endpoints = WebhookEndpoint.objects.filter(project_id=entry.project_id, active=True)
    for endpoint in (e for e in endpoints if event in e.events):
        delivery = WebhookDelivery.objects.create(
            endpoint=endpoint,
            event=event,
            payload={
                "event": event,
                "project": entry.project.slug,
                "at": entry.at.isoformat(),
                "actor": entry.actor_label,
                "summary": entry.summary,
                "object": {"type": entry.object_type, "id": entry.object_id},
                "data": entry.payload,
            },
        )
        transaction.on_commit(lambda pk=delivery.pk: _queue(pk), robust=True)


def connect() -> None:
    """Called once by GovernanceConfig.ready."""
    register_audit_listener(on_audit)


def _queue(delivery_id: int) -> None:
    current_app.send_task(DELIVER_TASK, args=(delivery_id,))


def webhook_attempt(*, delivery_id: int) -> bool:
    """One signed POST of a pending delivery; records the attempt. True when delivered (2xx) or
    no longer pending; False when it should be tried again."""
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    if delivery.status != WebhookDeliveryStatus.PENDING:
        return True
    body = json.dumps(delivery.payload, sort_keys=True, separators=(",", ":")).encode()
    request = urllib.request.Request(
        delivery.endpoint.url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "frame-governance-webhooks",
            "X-FG-Event": delivery.event,
            "X-FG-Delivery": str(delivery.pk),
            "X-FG-Signature": signature(delivery.endpoint.secret, body),
        },
    )
    code, error = None, ""
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310 - http(s) only
            code = response.status
    except urllib.error.HTTPError as refused:
        code, error = refused.code, f"HTTP {refused.code}"
    except (urllib.error.URLError, OSError) as failure:
        error = str(getattr(failure, "reason", failure))
    delivery.attempts += 1
    delivery.last_status_code = code
    delivery.last_error = error[:2000]
    if code is not None and 200 <= code < 300:
        delivery.status = WebhookDeliveryStatus.DELIVERED
        delivery.delivered_at = timezone.now()
        delivery.last_error = ""
    elif delivery.attempts >= MAX_ATTEMPTS:
        delivery.status = WebhookDeliveryStatus.FAILED
    delivery.save(update_fields=["attempts", "last_status_code", "last_error", "status", "delivered_at"])
    return delivery.status != WebhookDeliveryStatus.PENDING


def project_webhooks(*, project: Project) -> tuple[list[WebhookEndpoint], list[WebhookDelivery]]:
    """The project's endpoints and its latest 50 deliveries, for the webhooks page (two queries)."""
    endpoints = list(WebhookEndpoint.objects.filter(project=project).select_related("created_by"))
    deliveries = list(
        WebhookDelivery.objects.filter(endpoint__project=project)
        .select_related("endpoint")
        .order_by("-created_at", "-id")[:50]
    )
    return endpoints, deliveries
