"""The governance app's API routes: projects, frame versions and their diff, the audit log.

Proposals, with the backtests they start, are served by backtest/api.py, as the proposal page is.

Routes parse, call the selector or service the dashboard's views call, and shape the answer;
role checks happen in access.py through those services (and access_read for reads).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date, datetime
from typing import Any

from django.core.paginator import Paginator
from django.urls import reverse
from ninja import Field, Query, Router, Schema

from authority import access
from authority.selectors import current_frame_version
from rules import frame_diff as frames
from selection.api_fields import Id, Text
from selection.models import Project

from . import selectors

router = Router(tags=["governance"])

AUDIT_PAGE_SIZE = 50


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------


class ProjectOut(Schema):
    slug: str
    name: str
    corpus: str
    current_version: int | None
    frames_url: str
    page_url: str
    can_propose: bool
    can_review: bool
    can_promote: bool


class VersionOut(Schema):
    number: int
    url: str
    parent: int | None
    author: str
    origin: str
    created_at: datetime
    current: bool
    promotions: list[int] = Field(description="promotion sequences that made it current")
    proposal_id: int | None


class FrameOut(Schema):
    project: str
    number: int
    current: bool
    author: str
    origin: str
    created_at: datetime
    snapshot: dict[str, Any]


class MarkOut(Schema):
    text: str
    mark: str


class FieldDiffOut(Schema):
    path: str
    status: str = Field(description="same | changed | added | removed")
    left: list[MarkOut]
    right: list[MarkOut]


class FrameDiffOut(Schema):
    project: str
    a: int
    b: int
    changed: int
    rows: list[FieldDiffOut]


class FrameDiffIn(Schema):
    a: int = Field(ge=0, le=2_147_483_647)
    b: int = Field(ge=0, le=2_147_483_647)


class AuditFilterIn(Schema):
    project: Text = Field("", max_length=100)
    action: Text = Field("", max_length=50)
    actor: Text = Field("", max_length=150)
    since: date | None = None
    until: date | None = None
    page: int = Field(1, ge=1, le=1_000_000)


class AuditEntryOut(Schema):
    id: int
    at: datetime
    actor: str
    project: str | None
    action: str
    object_type: str
    object_id: str
    summary: str
    payload: dict[str, Any]


class AuditPageOut(Schema):
    count: int
    page: int
    pages: int
    results: list[AuditEntryOut]


# --------------------------------------------------------------------------------------------
# Projects and frames
# --------------------------------------------------------------------------------------------


@router.get("/projects", response=list[ProjectOut], url_name="projects", summary="The projects you may read")
def project_list(request):
    readable = set(access.readable_projects(request.auth, Project.objects.all()).values_list("pk", flat=True))
    rows = []
    for row in selectors.project_overview(user=request.auth):
        if row.project.pk not in readable:
            continue
        caps = access.capabilities(request.auth, row.project)
        rows.append(
            {
                "slug": row.project.slug,
                "name": row.project.name,
                "corpus": row.corpus_name,
                "current_version": row.current_version,
                "frames_url": reverse("api-1:frames", args=[row.project.slug]),
                "page_url": reverse("project-detail", args=[row.project.slug]),
                "can_propose": caps.can_propose,
                "can_review": caps.can_review,
                "can_promote": caps.can_promote,
            }
        )
    return rows


def _readable_project(user, slug: Text):
    project = selectors.project_for_slug(slug=slug)
    access.access_read(user, project)
    return project


@router.get(
    "/projects/{slug}/frames", response=list[VersionOut], url_name="frames", summary="A project's frame versions"
)
def frame_list(request, slug: Text):
    project = _readable_project(request.auth, slug)
    return [
        {
            "number": row.version.number,
            "url": reverse("api-1:frame", args=[project.slug, row.version.number]),
            "parent": row.parent_number,
            "author": row.version.author_label,
            "origin": row.version.origin,
            "created_at": row.version.created_at,
            "current": row.current,
            "promotions": list(row.promotions),
            "proposal_id": row.proposal_id,
        }
        for row in selectors.frame_history(project=project)
    ]


@router.get(
    "/projects/{slug}/frames/diff", response=FrameDiffOut, url_name="frame-diff", summary="Compare two versions"
)
def frame_diff(request, slug: Text, versions: Query[FrameDiffIn]):
    project = _readable_project(request.auth, slug)
    a = selectors.frame_version(project=project, number=versions.a)
    b = selectors.frame_version(project=project, number=versions.b)
    rows = frames.diff_frames(a.snapshot, b.snapshot)
    return {
        "project": project.slug,
        "a": a.number,
        "b": b.number,
        "changed": sum(r.changed for r in rows),
        "rows": [asdict(r) for r in rows],
    }


@router.get("/projects/{slug}/frames/{number}", response=FrameOut, url_name="frame", summary="One frame version")
def frame_detail(request, slug: Text, number: Id):
    project = _readable_project(request.auth, slug)
    version = selectors.frame_version(project=project, number=number)
    current = current_frame_version(project=project)
    return {
        "project": project.slug,
        "number": version.number,
        "current": current is not None and current.pk == version.pk,
        "author": version.author_label,
        "origin": version.origin,
        "created_at": version.created_at,
        "snapshot": version.snapshot,
    }


# --------------------------------------------------------------------------------------------
# Audit
# --------------------------------------------------------------------------------------------


@router.get("/audit", response=AuditPageOut, url_name="audit", summary="The audit log you may read")
def audit_log(request, filters: Query[AuditFilterIn]):
    """The audit page's filters, newest first, 50 a page."""
    project = None
    if filters.project:
        project = access.readable_projects(request.auth, Project.objects.all()).filter(slug=filters.project).first()
        if project is None:
            return {"count": 0, "page": 1, "pages": 1, "results": []}
    criteria = selectors.AuditFilters(
        project=project,
        action=filters.action,
        actor=filters.actor.strip(),
        since=filters.since,
        until=filters.until,
    )
    paginator = Paginator(selectors.audit_entries(user=request.auth, filters=criteria), AUDIT_PAGE_SIZE)
    page = paginator.get_page(filters.page)
    return {
        "count": paginator.count,
        "page": page.number,
        "pages": paginator.num_pages,
        "results": [
            {
                "id": e.pk,
                "at": e.at,
                "actor": e.actor_label,
                "project": e.project.slug if e.project else None,
                "action": e.action,
                "object_type": e.object_type,
                "object_id": e.object_id,
                "summary": e.summary,
                "payload": e.payload if isinstance(e.payload, dict) else {"value": e.payload},
            }
            for e in page
        ],
    }
