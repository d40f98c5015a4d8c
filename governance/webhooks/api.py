"""The webhooks of a project over the API (a lead's): list them, add one, rotate a secret.

A secret comes back in full only in the answer that made it (201 of a new endpoint, 200 of a
rotation); every other answer masks it, as the page does.
"""

from __future__ import annotations

from datetime import datetime

from ninja import Field, Router, Schema, Status

from authority import access
from selection.api_fields import Id, Text

from .. import selectors
from . import services as webhooks

router = Router(tags=["governance"])


class WebhookIn(Schema):
    url: Text = Field(max_length=500, description="an https URL at a public address")
    events: list[Text] = Field(max_length=20, description=f"among {', '.join(webhooks.EVENT_NAMES)}")


class WebhookOut(Schema):
    id: int
    url: str
    events: list[str]
    active: bool
    secret: str = Field(description="masked; in full only in the answer that made it")
    refusal: str = Field(description="why the latest delivery's target was refused, when it was")
    created_by: str | None
    created_at: datetime


class DeliveryOut(Schema):
    id: int
    webhook: int
    event: str
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str
    created_at: datetime


class WebhooksOut(Schema):
    webhooks: list[WebhookOut]
    deliveries: list[DeliveryOut]


def _document(endpoint, *, secret: str, refusal: str = "") -> dict:
    return {
        "id": endpoint.pk,
        "url": endpoint.url,
        "events": list(endpoint.events),
        "active": endpoint.active,
        "secret": secret,
        "refusal": refusal,
        "created_by": endpoint.created_by.username if endpoint.created_by else None,
        "created_at": endpoint.created_at,
    }


@router.get(
    "/projects/{slug}/webhooks", response=WebhooksOut, url_name="webhooks", summary="A project's webhooks (a lead's)"
)
def webhook_list(request, slug: Text):
    project = selectors.project_for_slug(slug=slug)
    access.access_webhooks(request.auth, project)
    rows, deliveries = webhooks.project_webhooks(project=project)
    return {
        "webhooks": [_document(r.endpoint, secret=r.secret, refusal=r.refusal) for r in rows],
        "deliveries": [
            {
                "id": d.pk,
                "webhook": d.endpoint_id,
                "event": d.event,
                "status": d.status,
                "attempts": d.attempts,
                "last_status_code": d.last_status_code,
                "last_error": d.last_error,
                "created_at": d.created_at,
            }
            for d in deliveries
        ],
    }


@router.post(
    "/projects/{slug}/webhooks", response={201: WebhookOut}, url_name="webhook-create", summary="Add a webhook"
)
def webhook_create(request, slug: Text, body: WebhookIn):
    """The answer carries the secret in full, once: keep it to check the signatures."""
    project = selectors.project_for_slug(slug=slug)
    issued = webhooks.webhook_create(project=project, lead=request.auth, url=body.url, events=list(body.events))
    return Status(201, _document(issued.endpoint, secret=issued.secret))


@router.post(
    "/projects/{slug}/webhooks/{webhook_id}/secret",
    response=WebhookOut,
    url_name="webhook-secret-rotate",
    summary="Rotate a webhook's secret",
)
def webhook_secret_rotate(request, slug: Text, webhook_id: Id):
    """A fresh secret, in full in this answer only; the one before stops signing at once."""
    project = selectors.project_for_slug(slug=slug)
    issued = webhooks.webhook_secret_rotate(project=project, lead=request.auth, endpoint_id=webhook_id)
    return _document(issued.endpoint, secret=issued.secret)
