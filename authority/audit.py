"""The audit log's one writer: every write in every app appends its row here, in its own transaction."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from .models import AuditEntry

# called with each new entry inside its write's transaction (the webhooks queue deliveries on commit)
_listeners: list = []


def register_audit_listener(listener) -> None:
    """An app above registers at start-up; a listener must not write audit rows itself."""
    if listener not in _listeners:
        _listeners.append(listener)


def audit_record(
    *,
    actor,
    project,
    action: str,
    obj: Any,
    summary: str = "",
    payload: dict | None = None,
) -> AuditEntry:
    """Append one audit row; call it inside the transaction.atomic of the write it records."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError(
            "audit_record must run inside the transaction.atomic of the write it records"
        )
    entry = AuditEntry.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_label=getattr(actor, "username", None) or "system",
        project=project,
        action=action,
        object_type=type(obj)._meta.model_name,
        object_id=str(obj.pk),
        summary=summary,
        payload=payload or {},
    )
    for listener in _listeners:
        listener(entry)
    return entry
