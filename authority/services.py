"""The only writers of frame versions and promotions; callers hold the transaction and audit.

Both rows are append-only (PostgreSQL triggers). Role checks belong to the action that writes
them (a proposal, a promotion, an import), which calls access.py before it calls these.
"""

from __future__ import annotations

from .models import FrameVersion, Promotion
from .selectors import next_frame_version_number, next_promotion_sequence

IMPORT_LABEL = "import"


def frame_version_create(
    *, project, snapshot: dict, parent: FrameVersion | None = None, author=None, origin: str = "proposal",
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
