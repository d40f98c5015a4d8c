"""A small test kit of memory writes made straight through the ORM and the memory sequence's one
appender (selection.memory.changes.memory_changes_append): create, supersede, erase, close a loop.
Each runs in its own transaction, as a write service does; vectors are deterministic per text."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import numpy as np
from django.db import transaction

from selection.engine.types import estimate_tokens
from selection.memory.changes import memory_changes_append
from selection.models import Corpus, MemoryChangeKind, MemoryUnit, UnitLink

DIMENSION = 8
T0 = datetime(2026, 9, 1, tzinfo=UTC)


def vector_of(text: str, dimension: int = DIMENSION) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dimension).astype(np.float32).tolist()


def unit_create(
    project,
    uid: str,
    text: str,
    *,
    evidence_class: str = "decision",
    title: str = "",
    day: int = 0,
    open_loop: bool = False,
    dimension: int = DIMENSION,
) -> MemoryUnit:
    with transaction.atomic():
        position = MemoryUnit.objects.filter(corpus_id=project.corpus_id).count()
        unit = MemoryUnit.objects.create(
            corpus_id=project.corpus_id,
            project=project,
            uid=uid,
            position=position,
            evidence_class=evidence_class,
            title=title,
            text=text,
            tokens=estimate_tokens(text),
            created_at=T0 + timedelta(days=day),
            valid_from=T0 + timedelta(days=day),
            open_loop_status="open" if open_loop else "",
            open_loop_kind="task" if open_loop else "",
            embedding=vector_of(text, dimension),
        )
        memory_changes_append(project.corpus_id, [(unit.pk, MemoryChangeKind.CREATED)], via="test")
    return unit


def unit_supersede(
    project, old: MemoryUnit, uid: str, text: str, *, day: int = 0, dimension: int = DIMENSION
) -> MemoryUnit:
    """A new unit superseding `old`; the old one's validity closes at the new one's valid_from."""
    with transaction.atomic():
        position = MemoryUnit.objects.filter(corpus_id=project.corpus_id).count()
        new = MemoryUnit.objects.create(
            corpus_id=project.corpus_id,
            project=project,
            uid=uid,
            position=position,
            evidence_class=old.evidence_class,
            text=text,
            tokens=estimate_tokens(text),
            created_at=T0 + timedelta(days=day),
            valid_from=T0 + timedelta(days=day),
            embedding=vector_of(text, dimension),
        )
        UnitLink.objects.create(source=new, target=old, kind="supersedes")
        MemoryUnit.objects.filter(pk=old.pk).update(valid_to=new.valid_from)
        memory_changes_append(
            project.corpus_id, [(new.pk, MemoryChangeKind.CREATED), (old.pk, MemoryChangeKind.CHANGED)], via="test"
        )
    return new


def unit_erase(unit: MemoryUnit, *, dimension: int = DIMENSION) -> None:
    """Text and title removed, the mark embedded (as selection.memory.erasure does), one change."""
    mark = f"[erased by test: {unit.uid}]"
    with transaction.atomic():
        MemoryUnit.objects.filter(pk=unit.pk).update(
            text=mark,
            title="",
            tokens=estimate_tokens(mark),
            embedding=vector_of(mark, dimension),
            extras={"x-erased": {"by": "test", "at": T0.isoformat(), "reason": "test"}},
        )
        memory_changes_append(unit.corpus_id, [(unit.pk, MemoryChangeKind.ERASED)], via="test")


def loop_close(unit: MemoryUnit) -> None:
    with transaction.atomic():
        MemoryUnit.objects.filter(pk=unit.pk).update(open_loop_status="closed")
        memory_changes_append(unit.corpus_id, [(unit.pk, MemoryChangeKind.CHANGED)], via="test")


def status_set(unit: MemoryUnit, status: str) -> None:
    kind = MemoryChangeKind.ADMITTED if status == "active" else MemoryChangeKind.DECLINED
    with transaction.atomic():
        MemoryUnit.objects.filter(pk=unit.pk).update(status=status)
        memory_changes_append(unit.corpus_id, [(unit.pk, kind)], via="test")


def sequence_of(corpus_id: int) -> int:
    return Corpus.objects.filter(pk=corpus_id).values_list("sequence", flat=True).get()


def trace_digest(result) -> str:
    """SHA-256 of the selection's whole trace (its JSON form, keys sorted)."""
    text = json.dumps(result.trace.as_dict(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
