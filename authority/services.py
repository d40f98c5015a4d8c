"""The only writers of frame versions and promotions; callers hold the transaction and audit.

Both rows are append-only (PostgreSQL triggers). Role checks belong to the action that writes
them (a proposal, a promotion, an import), which calls access.py before it calls these.
"""

from __future__ import annotations

from django.db import transaction

from . import access
from .audit import audit_record
from .models import FrameVersion, Promotion, Role, RoleGrant
from .selectors import next_frame_version_number, next_promotion_sequence

IMPORT_LABEL = "import"


def frame_version_create(
    *,
    project,
    snapshot: dict,
    parent: FrameVersion | None = None,
    author=None,
    origin: str = "proposal",
    number: int | None = None,
) -> FrameVersion:
    """A new immutable version of the project's frame, numbered after the last one."""
    return FrameVersion.objects.create(
        project=project,
        number=number if number is not None else next_frame_version_number(project=project),
        snapshot=snapshot,
        parent=parent,
        author=author if getattr(author, "pk", None) else None,
        author_label=getattr(author, "username", None) or IMPORT_LABEL,
        origin=origin,
    )


def promotion_create(*, project, frame_version: FrameVersion, promoted_by=None) -> Promotion:
    """Make `frame_version` current: sequence = previous + 1, so two concurrent promotions of one
    project collide on the unique constraint (project, sequence) rather than both winning."""
    return Promotion.objects.create(
        project=project,
        frame_version=frame_version,
        sequence=next_promotion_sequence(project=project),
        promoted_by=promoted_by if getattr(promoted_by, "pk", None) else None,
    )


# --- role grants: every grant and revocation is audited ------------------------------------------


def role_grant(*, user, project, role: str, actor=None):
    """Give `user` a role in `project` (idempotent); audited with who granted it.

    `actor` None is the system (a command run by an operator); a person needs the lead role there.
    """
    if role not in Role.values:
        raise ValueError(f'role "{role}" is not one of: {", ".join(Role.values)}')
    if actor is not None:
        access.access_promote(actor, project)  # the lead's right: who may change the frame
    with transaction.atomic():
        grant, created = RoleGrant.objects.get_or_create(user=user, project=project, role=role)
        if created:
            audit_record(
                actor=actor,
                project=project,
                action="role.granted",
                obj=grant,
                summary=f"{user.username} is {role} of {project.slug}",
                payload={"user": user.username, "role": role},
            )
    return grant


def role_revoke(*, user, project, role: str, actor=None) -> bool:
    """Take a role away (True when there was one to take); audited like a grant."""
    if actor is not None:
        access.access_promote(actor, project)
    with transaction.atomic():
        grant = RoleGrant.objects.filter(user=user, project=project, role=role).first()
        if grant is None:
            return False
        audit_record(
            actor=actor,
            project=project,
            action="role.revoked",
            obj=grant,
            summary=f"{user.username} is no longer {role} of {project.slug}",
            payload={"user": user.username, "role": role},
        )
        grant.delete()
    return True
