"""Structural conflicts: two active, current units of one project with the same subject and facet.

Subject and facet are a unit's structural identity (docs/corpus-format.md): two current units that
share them say two things about one matter. A unit is current while no active unit supersedes it
and its validity is open. Names compare casefolded ("Ship-Rule" is "ship-rule").
"""

from __future__ import annotations

from collections.abc import Collection

from django.db.models import Exists, OuterRef
from django.db.models.functions import Lower

from selection.models import LinkKind, MemoryUnit, Project, UnitLink, UnitStatus


def structural_conflicts(
    *, project: Project, subject: str | None, facet: str | None, exclude: Collection[str] = ()
) -> list[MemoryUnit]:
    """The current active units of `project` with this subject and facet (casefolded), by id;
    `exclude`: ids that do not count (the unit itself, the units it supersedes)."""
    if not subject or not facet:
        return []
    superseded = UnitLink.objects.filter(
        target=OuterRef("pk"), kind=LinkKind.SUPERSEDES, source__status=UnitStatus.ACTIVE
    )
    return list(
        MemoryUnit.objects.annotate(subject_folded=Lower("subject"), facet_folded=Lower("facet"))
        .filter(
            project=project,
            status=UnitStatus.ACTIVE,
            valid_to__isnull=True,
            subject_folded=subject.casefold(),
            facet_folded=facet.casefold(),
        )
        .exclude(uid__in=list(exclude))
        .exclude(Exists(superseded))
        .order_by("uid")
    )


def conflicts_of(unit: MemoryUnit) -> list[MemoryUnit]:
    """The units a (candidate or active) unit collides with, the ones it supersedes left out."""
    supersedes = UnitLink.objects.filter(source=unit, kind=LinkKind.SUPERSEDES).values_list("target__uid", flat=True)
    return structural_conflicts(
        project=unit.project, subject=unit.subject, facet=unit.facet, exclude={unit.uid, *supersedes}
    )
