"""The governance app's API routes: projects and frame versions, proposals, promotion, audit.

Routes parse, call the selector or service the dashboard's views call, and shape the answer;
role checks happen in access.py through those services (and access_read for reads).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date, datetime
from typing import Any

from django.core.paginator import Paginator
from django.urls import reverse
from ninja import Field, Query, Router, Schema, Status

from selection.api_fields import Id, JsonObject, Text

from . import access, frames, selectors, services

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


class ProposalIn(Schema):
    project: Text = Field(min_length=1, max_length=100)
    title: Text = Field(min_length=1, max_length=300)
    rationale: Text = Field("", max_length=20_000)
    patch: JsonObject = Field(description="a JSON Merge Patch (RFC 7396) over the current promoted frame")
    base_version: int | None = Field(
        None, ge=0, le=2_147_483_647, description="the version you edited; refused if another was promoted since"
    )


class BacktestRefOut(Schema):
    id: int
    url: str
    status: str


class ProposalOut(Schema):
    id: int
    url: str
    page_url: str
    project: str
    title: str
    rationale: str
    state: str
    patch: dict[str, Any]
    base_version: int
    frame_version: int
    warnings: list[str]
    author: str | None
    created_at: datetime
    backtests: list[BacktestRefOut] = Field(description="newest first")
    promotion_blockers: list[str]


class PromotionOut(Schema):
    project: str
    proposal_id: int
    frame_version: int
    sequence: int
    promoted_by: str
    promoted_at: datetime


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
    readable = set(access.readable_projects(request.auth).values_list("pk", flat=True))
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
    current = selectors.current_frame_version(project=project)
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
# Proposals and promotion
# --------------------------------------------------------------------------------------------


def _proposal(proposal) -> dict:
    return {
        "id": proposal.pk,
        "url": reverse("api-1:proposal", args=[proposal.pk]),
        "page_url": reverse("proposal-detail", args=[proposal.pk]),
        "project": proposal.project.slug,
        "title": proposal.title,
        "rationale": proposal.rationale,
        "state": proposal.state,
        "patch": proposal.patch if isinstance(proposal.patch, dict) else {},
        "base_version": proposal.base_version.number,
        "frame_version": proposal.frame_version.number,
        "warnings": [str(w) for w in proposal.warnings],
        "author": proposal.author.username if proposal.author else None,
        "created_at": proposal.created_at,
        "backtests": [
            {"id": b.pk, "url": reverse("api-1:backtest", args=[b.pk]), "status": b.status}
            for b in selectors.proposal_backtests(proposal=proposal)
        ],
        "promotion_blockers": selectors.promotion_blockers(proposal=proposal),
    }


@router.post("/proposals", response={201: ProposalOut}, url_name="proposals", summary="Propose a frame change")
def proposal_create(request, body: ProposalIn):
    """Store a JSON Merge Patch over the current frame as a new version and start its backtest."""
    project = selectors.project_for_slug(slug=body.project)
    access.access_propose(request.auth, project)  # before parsing further: a refused POST writes nothing
    expected = (
        selectors.frame_version(project=project, number=body.base_version) if body.base_version is not None else None
    )
    proposal = services.proposal_submit(
        project=project,
        author=request.auth,
        title=body.title,
        rationale=body.rationale,
        patch=body.patch,
        expected_base=expected,
    )
    return Status(201, _proposal(selectors.proposal_by_id(proposal_id=proposal.pk)))


@router.get("/proposals/{proposal_id}", response=ProposalOut, url_name="proposal", summary="One proposal")
def proposal_detail(request, proposal_id: Id):
    proposal = selectors.proposal_by_id(proposal_id=proposal_id)
    access.access_read(request.auth, proposal.project)
    return _proposal(proposal)


@router.post(
    "/proposals/{proposal_id}/promotion",
    response={201: PromotionOut},
    url_name="promotion",
    summary="Promote an approved proposal",
)
def proposal_promote(request, proposal_id: Id):
    proposal = selectors.proposal_by_id(proposal_id=proposal_id)
    promotion = services.proposal_promote(proposal=proposal, lead=request.auth)
    return Status(
        201,
        {
            "project": proposal.project.slug,
            "proposal_id": proposal.pk,
            "frame_version": promotion.frame_version.number,
            "sequence": promotion.sequence,
            "promoted_by": request.auth.username,
            "promoted_at": promotion.promoted_at,
        },
    )


# --------------------------------------------------------------------------------------------
# Audit
# --------------------------------------------------------------------------------------------


@router.get("/audit", response=AuditPageOut, url_name="audit", summary="The audit log you may read")
def audit_log(request, filters: Query[AuditFilterIn]):
    """The audit page's filters, newest first, 50 a page."""
    project = None
    if filters.project:
        project = access.readable_projects(request.auth).filter(slug=filters.project).first()
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
