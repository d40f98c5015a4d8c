"""Notifications out: signed webhooks per project, configured by a lead, fed by the audit log.

Every write already records an audit row in its own transaction; `on_audit` (registered with
authority.audit at start-up) turns the rows of the events below into one WebhookDelivery per
endpoint that wants them, and queues each on commit. `webhook_attempt` makes one POST, signed
`X-FG-Signature: sha256=<hex HMAC-SHA256 of the body under the endpoint's secret>`, to a target
checked when it is sent (targets.py: https, public addresses only; transport.py: no redirects,
time-outs); the Celery task (governance.tasks) retries it with exponential backoff and gives up
after MAX_ATTEMPTS, and every attempt is recorded on the delivery, which the project's webhooks
page lists. A refused target fails its delivery at once, the reason in the log.

A secret is shown once, when it is made (at creation or by a rotation); pages and the API show
it masked after that.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from authority import access
from authority.audit import audit_record, register_audit_listener
from authority.errors import InputRefused
from selection.models import Project

from ..models import WebhookDelivery, WebhookDeliveryStatus, WebhookEndpoint
from . import transport
from .targets import TargetRefused, literal_refusal, target_checked, url_parts

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
DELIVER_TASK = "governance.deliver_webhook"
REFUSAL_PREFIX = "refused: "  # a delivery's last_error when its target was refused


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class IssuedSecret:
    """An endpoint and its secret in full, which only this answer carries: show it once."""

    endpoint: WebhookEndpoint
    secret: str


def masked_secret(endpoint: WebhookEndpoint) -> str:
    """What every page and API answer shows of a secret after it was issued: its last 4 characters."""
    return "••••" + endpoint.secret[-4:]


def url_checked(url: str) -> str:
    """`url` stripped, or InputRefused naming the field: https (http only where
    FG_WEBHOOK_ALLOW_HTTP is on) and no address literal inside the server's networks."""
    url = (url or "").strip()
    try:
        url_parts(url)
        why = literal_refusal(url)
    except TargetRefused as refused:
        raise InputRefused(str(refused), field=("url",)) from refused
    if why is not None:
        raise InputRefused(f"{why}: webhooks reach public addresses only", field=("url",))
    if len(url) > WebhookEndpoint._meta.get_field("url").max_length:
        raise InputRefused("the URL is over 500 characters", field=("url",))
    return url


def webhook_create(*, project: Project, lead, url: str, events: list[str]) -> IssuedSecret:
    """A lead adds an endpoint; its secret is generated here and shown once, in this answer."""
    access.access_webhooks(lead, project)
    url = url_checked(url)
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
            actor=lead,
            project=project,
            action="webhook.created",
            obj=endpoint,
            summary=f"webhook to {url} for {', '.join(endpoint.events)}",
            payload={"url": url, "events": endpoint.events},
        )
    return IssuedSecret(endpoint=endpoint, secret=endpoint.secret)


def webhook_secret_rotate(*, project: Project, lead, endpoint_id: int) -> IssuedSecret:
    """A lead replaces an endpoint's secret; the one before stops signing at once. Audited
    (`webhook.secret_rotated`, the secrets themselves never in the log)."""
    access.access_webhooks(lead, project)
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().filter(project=project, pk=endpoint_id).first()
        if endpoint is None:
            raise WebhookEndpoint.DoesNotExist(f"{project.slug} has no webhook #{endpoint_id}")
        was = masked_secret(endpoint)
        endpoint.secret = secrets.token_hex(32)
        endpoint.save(update_fields=["secret"])
        audit_record(
            actor=lead,
            project=project,
            action="webhook.secret_rotated",
            obj=endpoint,
            summary=f"secret of the webhook to {endpoint.url} rotated",
            payload={"url": endpoint.url, "was": was, "now": masked_secret(endpoint)},
        )
    return IssuedSecret(endpoint=endpoint, secret=endpoint.secret)


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
    """One signed POST of a pending delivery; records the attempt. True when delivered (2xx),
    refused (its target is not one the server sends to) or no longer pending; False when it
    should be tried again."""
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    if delivery.status != WebhookDeliveryStatus.PENDING:
        return True
    body = json.dumps(delivery.payload, sort_keys=True, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "frame-governance-webhooks",
        "X-FG-Event": delivery.event,
        "X-FG-Delivery": str(delivery.pk),
        "X-FG-Signature": signature(delivery.endpoint.secret, body),
    }
    delivery.attempts += 1
    try:
        target = target_checked(delivery.endpoint.url)
    except TargetRefused as refused:
        delivery.last_status_code = None
        delivery.last_error = f"{REFUSAL_PREFIX}{refused}"[:2000]
        delivery.status = WebhookDeliveryStatus.FAILED
    else:
        answer = transport.post(
            target,
            body,
            headers,
            connect_timeout=settings.FG_WEBHOOK_CONNECT_TIMEOUT,
            read_timeout=settings.FG_WEBHOOK_READ_TIMEOUT,
        )
        delivery.last_status_code = answer.status
        delivery.last_error = answer.error[:2000]
        if answer.status is not None and 200 <= answer.status < 300:
            delivery.status = WebhookDeliveryStatus.DELIVERED
            delivery.delivered_at = timezone.now()
        elif delivery.attempts >= MAX_ATTEMPTS:
            delivery.status = WebhookDeliveryStatus.FAILED
    delivery.save(update_fields=["attempts", "last_status_code", "last_error", "status", "delivered_at"])
    return delivery.status != WebhookDeliveryStatus.PENDING


@dataclass(frozen=True)
class EndpointRow:
    """An endpoint as the page shows it: the secret masked, the last refusal of its target."""

    endpoint: WebhookEndpoint
    secret: str
    refusal: str


def project_webhooks(*, project: Project) -> tuple[list[EndpointRow], list[WebhookDelivery]]:
    """The project's endpoints and its latest 50 deliveries, for the webhooks page and the API
    (three queries)."""
    endpoints = list(WebhookEndpoint.objects.filter(project=project).select_related("created_by"))
    deliveries = list(
        WebhookDelivery.objects.filter(endpoint__project=project)
        .select_related("endpoint")
        .order_by("-created_at", "-id")[:50]
    )
    # the latest delivery of each endpoint: its refusal, when its target was refused
    latest = (
        WebhookDelivery.objects.filter(endpoint__project=project)
        .order_by("endpoint_id", "-created_at", "-id")
        .distinct("endpoint_id")
        .values_list("endpoint_id", "last_error")
    )
    refusals = {pk: error for pk, error in latest if error.startswith(REFUSAL_PREFIX)}
    rows = [EndpointRow(endpoint=e, secret=masked_secret(e), refusal=refusals.get(e.pk, "")) for e in endpoints]
    return rows, deliveries
