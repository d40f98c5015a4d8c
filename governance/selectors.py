"""Reads for the governance pages; list pages stay at a fixed number of queries."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, OuterRef, Subquery

from selection.models import Project

from .models import FrameVersion, Promotion


@dataclass(frozen=True)
class ProjectRow:
    project: Project
    corpus_name: str
    current_version: int | None
    unit_count: int
    task_count: int


def current_frame_version(*, project: Project) -> FrameVersion | None:
    promotion = (
        Promotion.objects.filter(project=project).select_related("frame_version").order_by("-sequence").first()
    )
    return promotion.frame_version if promotion else None


def project_overview(*, user=None) -> list[ProjectRow]:
    latest = Promotion.objects.filter(project=OuterRef("pk")).order_by("-sequence")
    projects = (
        Project.objects.select_related("corpus")
        .annotate(
            current_version=Subquery(latest.values("frame_version__number")[:1]),
            unit_count=Count("units", distinct=True),
            task_count=Count("tasks", distinct=True),
        )
        .order_by("corpus__name", "position", "slug")
    )
    return [
        ProjectRow(p, p.corpus.name, p.current_version, p.unit_count, p.task_count) for p in projects
    ]
