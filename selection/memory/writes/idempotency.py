"""Idempotency: a write sent with a key is applied at most once.

The key is the client's (an `Idempotency-Key` header, an `idempotency_key` argument); it is held per
writer and project (MemoryWriteKey). The first write with a key stores its answer in its own
transaction; a retry with the same key and the same request gets that answer back and changes
nothing; the same key with another request is refused (WriteConflict, 409). Two retries racing
each other meet at the corpus row's lock, so the second finds the first's answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from selection.memory.writes.records import VIAS, MemoryWrite
from selection.memory.writes.validation import WriteConflict, idempotency_key_checked
from selection.models import Corpus, MemoryWriteKey, Project


@dataclass(frozen=True)
class WriteRequest:
    """One write as sent: what it does (its audit action), who, where, through what, with which key."""

    action: str
    actor: Any
    project: Project
    via: str
    key: str | None
    body: Any

    @property
    def digest(self) -> str:
        canonical = json.dumps({"action": self.action, "body": self.body}, sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _replayed(request: WriteRequest, key: str) -> MemoryWrite | None:
    stored = MemoryWriteKey.objects.filter(project=request.project, actor_id=request.actor.pk, key=key).first()
    if stored is None:
        return None
    if stored.action != request.action or stored.digest != request.digest:
        raise WriteConflict(
            f'Idempotency-Key "{key}" was sent with another request ({stored.action} at '
            f"{stored.created_at:%Y-%m-%d %H:%M:%S} UTC): a key names one request; send a new key for a new write"
        )
    return MemoryWrite(document=stored.answer, replayed=True)


def write_once(request: WriteRequest, apply: Callable[[], dict[str, Any]]) -> MemoryWrite:
    """Run `apply` (the write, returning its answer) in one transaction under the corpus row's lock,
    at most once per idempotency key."""
    if request.via not in VIAS:
        raise ValueError(f"unknown write surface {request.via!r}")
    key = idempotency_key_checked(request.key)
    if key is not None:
        replay = _replayed(request, key)
        if replay is not None:
            return replay
    try:
        with transaction.atomic():
            Corpus.objects.select_for_update().filter(pk=request.project.corpus_id).values_list("pk").get()
            if key is not None:
                replay = _replayed(request, key)
                if replay is not None:
                    return replay
            document = apply()
            if key is not None:
                MemoryWriteKey.objects.create(
                    project=request.project,
                    actor=request.actor,
                    key=key,
                    action=request.action,
                    digest=request.digest,
                    answer=document,
                )
    except IntegrityError:
        replay = _replayed(request, key) if key is not None else None
        if replay is None:
            raise
        return replay
    return MemoryWrite(document=document)
