"""Celery tasks of governance: thin; a webhook delivery is retried here with exponential backoff."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from .webhooks import services as webhooks


@shared_task(bind=True, name=webhooks.DELIVER_TASK, acks_late=True, max_retries=webhooks.MAX_ATTEMPTS)
def deliver_webhook(self, delivery_id: int) -> bool:
    """One attempt; a failed one is tried again after FG_WEBHOOK_BACKOFF_SECONDS × 2^retries, and
    webhook_attempt marks the delivery failed after its last attempt."""
    if webhooks.webhook_attempt(delivery_id=delivery_id):
        return True
    raise self.retry(countdown=settings.FG_WEBHOOK_BACKOFF_SECONDS * 2**self.request.retries)
