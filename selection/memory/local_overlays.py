"""Writes of local overlays: a user's private units in one project, kept apart from the corpus.

They are never exported (selection/memory/exporting.py reads MemoryUnit only) and never imported.
Each put and removal writes its audit row in its transaction, naming the unit by id only: its
text stays the user's.
"""

from __future__ import annotations

from django.db import transaction

from authority.audit import audit_record
from selection.corpus.places import IDENTIFIER, NAME_RULE
from selection.models import LocalUnit, Project


class LocalOverlayError(ValueError):
    pass


def local_unit_put(
    *,
    user,
    project: Project,
    uid: str,
    text: str,
    evidence_class: str = "preference",
    title: str = "",
    subject: str = "",
    facet: str = "",
    supersedes: tuple[str, ...] = (),
) -> LocalUnit:
    """Create or replace one local unit. Whether it may join a bundle is decided at selection
    time, against the shared memory of that moment (it can never override shared memory)."""
    if not IDENTIFIER.fullmatch(uid):
        raise LocalOverlayError(f'local unit id "{uid}" {NAME_RULE}')
    if not text.strip():
        raise LocalOverlayError("a local unit needs a text")
    with transaction.atomic():
        unit, _ = LocalUnit.objects.update_or_create(
            user=user,
            project=project,
            uid=uid,
            defaults={
                "text": text,
                "evidence_class": evidence_class,
                "title": title,
                "subject": subject,
                "facet": facet,
                "supersedes": list(supersedes),
            },
        )
        audit_record(
            actor=user, project=project, action="local_unit.put", obj=unit,
            summary=f"local unit {uid} ({evidence_class})", payload={"uid": uid, "evidence_class": evidence_class},
        )  # fmt: skip
    return unit


def local_unit_remove(*, user, project: Project, uid: str) -> bool:
    with transaction.atomic():
        unit = LocalUnit.objects.select_for_update().filter(user=user, project=project, uid=uid).first()
        if unit is None:
            return False
        audit_record(
            actor=user, project=project, action="local_unit.removed", obj=unit,
            summary=f"local unit {uid} removed", payload={"uid": uid},
        )  # fmt: skip
        unit.delete()
    return True
