"""Reads of what is in force: the promoted frame version of a project, and versions by number."""

from __future__ import annotations

from django.db.models import Max

from .models import FrameVersion, Promotion


def current_frame_version(*, project) -> FrameVersion | None:
    """The version the project's latest promotion made current, or None before any promotion."""
    promotion = (
        Promotion.objects.filter(project=project)
        .select_related("frame_version")
        .order_by("-sequence")
        .first()
    )
    return promotion.frame_version if promotion else None


def next_frame_version_number(*, project) -> int:
    return (FrameVersion.objects.filter(project=project).aggregate(n=Max("number"))["n"] or 0) + 1


def next_promotion_sequence(*, project) -> int:
    return (Promotion.objects.filter(project=project).aggregate(n=Max("sequence"))["n"] or 0) + 1


def frame_version_by_id(*, version_id: int) -> FrameVersion:
    return FrameVersion.objects.select_related("project").get(pk=version_id)


def frame_version_by_number(*, project, number: int) -> FrameVersion:
    return FrameVersion.objects.get(project=project, number=number)
