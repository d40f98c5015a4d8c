"""A proposal's API routes: propose, read, split, rebase, close, roll back, promote, comment, its thread.

As on the proposal pages: reads check access_read; each write goes through its service
(services.proposal_submit, promotion.proposal_promote, ...), which checks its role itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.urls import reverse
from ninja import Field, Router, Schema, Status

from authority import access
from backtest import selectors as backtest_selectors
from backtest.review import selectors as review_selectors
from backtest.review import services as review_services
from selection.api_fields import Id, JsonObject, Text
from selection.evaluation.task_sets import task_set_label, task_set_versions

from .. import selectors as governance_selectors
from . import promotion as promotions
from . import selectors, services, timeline

router = Router(tags=["governance"])


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
    task_set_version: str = Field(description='the task-set version it replayed: "v3", or "as imported"')


class OpenConflictOut(Schema):
    id: int
    url: str
    keys: list[str] = Field(description="the keys both proposals change")


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
    kind: str = Field("change", description="change | rebase | rollback")
    supersedes: int | None = Field(None, description="the proposal this one replaces (a rebase)")
    superseded_by: int | None = Field(None, description="the proposal that replaced this one")
    restores: int | None = Field(None, description="the version a rollback restores")
    task_sets_differ: list[str] = Field(
        default_factory=list,
        description="the task-set versions its backtests ran on, when they differ (compare across a change of tasks)",
    )
    closed_reason: str | None = Field(None, description="why it was closed, when it is")
    stale_reason: str | None = Field(None, description="why it can no longer be promoted as it is, when stale")
    conflicts: list[OpenConflictOut] = Field(
        default_factory=list, description="other open proposals of the project changing the same keys"
    )


class RebaseIn(Schema):
    resolutions: dict[Text, Literal["mine", "theirs"]] = Field(
        default_factory=dict,
        description='per conflicting key: "mine" keeps the proposal\'s value, "theirs" the current version\'s',
    )


class CloseIn(Schema):
    reason: Text = Field(min_length=1, max_length=2_000)


class RollbackIn(Schema):
    project: Text = Field(min_length=1, max_length=100)
    version: int = Field(ge=1, le=2_147_483_647, description="the earlier version to restore")
    rationale: Text = Field("", max_length=20_000)


class CommentIn(Schema):
    body: Text = Field(min_length=1, max_length=20_000)
    backtest: int | None = Field(None, ge=1, le=2_147_483_647, description="with task: the backtest whose row it is")
    task: Text | None = Field(None, max_length=200, description="a task of that backtest (its id in the corpus)")


class TimelineEventOut(Schema):
    at: datetime
    kind: str = Field(description="submitted | backtest | approve | reject | comment | closed | promoted")
    who: str
    text: str
    body: str
    task: str
    void: bool
    links: list[dict[str, str]]


class PromotionOut(Schema):
    project: str
    proposal_id: int
    frame_version: int
    sequence: int
    promoted_by: str
    promoted_at: datetime


def _proposal(proposal) -> dict:
    backtests = review_selectors.proposal_backtests(proposal=proposal)
    versions = task_set_versions(project=proposal.project)
    labels = [task_set_label(b.task_set_digest, versions, b.task_set_version) for b in backtests]
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
            {"id": b.pk, "url": reverse("api-1:backtest", args=[b.pk]), "status": b.status, "task_set_version": label}
            for b, label in zip(backtests, labels, strict=True)
        ],
        "task_sets_differ": sorted(set(labels)) if len(set(labels)) > 1 else [],
        "promotion_blockers": selectors.promotion_blockers(proposal=proposal),
        "kind": proposal.kind,
        "supersedes": proposal.supersedes_id,
        "superseded_by": successor.pk if (successor := selectors.proposal_successor(proposal)) else None,
        "restores": proposal.restores.number if proposal.restores_id else None,
        "closed_reason": closure.reason if (closure := selectors.proposal_closure(proposal)) else None,
        "stale_reason": selectors.stale_reason(
            proposal, current=selectors.current_with_proposal(project=proposal.project)
        ),
        "conflicts": [
            {"id": c.proposal.pk, "url": reverse("api-1:proposal", args=[c.proposal.pk]), "keys": list(c.keys)}
            for c in selectors.open_conflicts(
                [proposal], among=selectors.open_proposals(project=proposal.project)
            ).get(proposal.pk, [])
        ],
    }


@router.post("/proposals", response={201: ProposalOut}, url_name="proposals", summary="Propose a frame change")
def proposal_create(request, body: ProposalIn):
    """Store a JSON Merge Patch over the current frame as a new version and start its backtest."""
    project = governance_selectors.project_for_slug(slug=body.project)
    access.access_propose(request.auth, project)  # before parsing further: a refused POST writes nothing
    expected = (
        governance_selectors.frame_version(project=project, number=body.base_version)
        if body.base_version is not None
        else None
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
    "/proposals/{proposal_id}/split",
    response={201: list[ProposalOut]},
    url_name="proposal-split",
    summary="Split a proposal into one proposal per part",
)
def proposal_split(request, proposal_id: Id):
    """One new proposal per part of the patch (a work type's list, the scope, the class pull, ...),
    each with its own backtest; the ablation of a backtest says which part costs more than it gives."""
    proposal = selectors.proposal_by_id(proposal_id=proposal_id)
    created = services.proposal_split(proposal=proposal, lead=request.auth)
    return Status(201, [_proposal(selectors.proposal_by_id(proposal_id=p.pk)) for p in created])


@router.post(
    "/proposals/{proposal_id}/promotion",
    response={201: PromotionOut},
    url_name="promotion",
    summary="Promote an approved proposal",
)
def proposal_promote(request, proposal_id: Id):
    proposal = selectors.proposal_by_id(proposal_id=proposal_id)
    promotion = promotions.proposal_promote(proposal=proposal, lead=request.auth)
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


@router.post(
    "/proposals/{proposal_id}/rebase",
    response={201: ProposalOut},
    url_name="proposal-rebase",
    summary="Rebase a stale proposal over the current version",
)
def proposal_rebase(request, proposal_id: Id, body: RebaseIn):
    """A new proposal superseding this one, its patch re-applied over the promoted version; a key both
    changed is a 409 naming each conflict until `resolutions` chooses for it. Approvals do not carry over."""
    proposal = selectors.proposal_by_id(proposal_id=proposal_id)
    rebased = services.proposal_rebase(
        proposal=proposal, author=request.auth, resolutions=dict(body.resolutions)
    )
    return Status(201, _proposal(selectors.proposal_by_id(proposal_id=rebased.pk)))


@router.post(
    "/proposals/{proposal_id}/close", response=ProposalOut, url_name="proposal-close", summary="Close an open proposal"
)
def proposal_close(request, proposal_id: Id, body: CloseIn):
    proposal = selectors.proposal_by_id(proposal_id=proposal_id)
    services.proposal_close(proposal=proposal, lead=request.auth, reason=body.reason)
    return _proposal(selectors.proposal_by_id(proposal_id=proposal_id))


@router.post(
    "/rollbacks", response={201: ProposalOut}, url_name="rollbacks", summary="Propose restoring an earlier version"
)
def proposal_rollback(request, body: RollbackIn):
    """One action: a proposal whose patch restores `version`, backtested and reviewed like any other."""
    project = governance_selectors.project_for_slug(slug=body.project)
    access.access_propose(request.auth, project, action="roll back the frame")
    version = governance_selectors.frame_version(project=project, number=body.version)
    proposal = promotions.proposal_rollback(
        project=project, author=request.auth, to_version=version, rationale=body.rationale
    )
    return Status(201, _proposal(selectors.proposal_by_id(proposal_id=proposal.pk)))


@router.post(
    "/proposals/{proposal_id}/comments",
    response={201: list[TimelineEventOut]},
    url_name="proposal-comments",
    summary="Comment on a proposal or on one task row of its backtest",
)
def proposal_comment(request, proposal_id: Id, body: CommentIn):
    """Returns the proposal's thread, the new comment last."""
    proposal = selectors.proposal_by_id(proposal_id=proposal_id)
    access.access_comment(request.auth, proposal.project)
    backtest = None
    if body.backtest is not None:
        backtest = backtest_selectors.proposal_backtest(proposal=proposal, backtest_id=body.backtest)
    task_id = backtest_selectors.backtest_task_id(backtest=backtest, uid=body.task) if body.task and backtest else None
    review_services.review_comment(
        proposal=proposal, author=request.auth, body=body.body, backtest=backtest, task_id=task_id
    )
    return Status(201, _timeline(proposal))


def _timeline(proposal) -> list[dict]:
    return [
        {
            "at": e.at, "kind": e.kind, "who": e.who, "text": e.text, "body": e.body, "task": e.task,
            "void": e.void, "links": [{"label": label, "url": url} for label, url in e.links],
        }
        for e in timeline.proposal_timeline(proposal=proposal)
    ]


@router.get(
    "/proposals/{proposal_id}/timeline",
    response=list[TimelineEventOut],
    url_name="proposal-timeline",
    summary="A proposal's discussion and decisions, oldest first",
)
def proposal_timeline(request, proposal_id: Id):
    proposal = selectors.proposal_by_id(proposal_id=proposal_id)
    access.access_read(request.auth, proposal.project)
    return _timeline(proposal)
