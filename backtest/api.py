"""The backtest app's API routes: proposals (with the backtests they start) and their promotion,
one backtest (state, progress, gates, per-task deltas) and its review.

As on the proposal and backtest pages: reads check access_read; a proposal goes through
governance.services.proposal_submit, a verdict through services.backtest_review, a promotion
through governance.services.proposal_promote, each checking its role itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.urls import reverse
from ninja import Field, Router, Schema, Status

from authority import access
from governance import selectors as governance_selectors
from governance import services as governance_services
from selection.api_fields import Id, JsonObject, Text
from selection.evaluation.task_sets import task_set_label, task_set_versions

from . import discussion, review_card, selectors, services
from .health import selectors as health_selectors

router = Router(tags=["backtest"])


class ProgressOut(Schema):
    done: int
    total: int
    percent: int
    finished: bool


class GateOut(Schema):
    gate: str
    metric: str
    baseline: float | None
    candidate: float | None
    passed: bool
    reason: str


class DecisionOut(Schema):
    passed: bool
    primary_metric: str
    baseline_means: dict[str, float | None]
    candidate_means: dict[str, float | None]
    gates: list[GateOut]
    per_task_deltas: list[dict[str, Any]]
    ablation: list[dict[str, Any]] = Field(
        default_factory=list,
        description="one row per part of the proposal: part, alone, marginal, flagged, hurt_tasks (2 parts or more)",
    )
    decided_at: datetime


class ApprovalOut(Schema):
    verdict: str
    comment: str
    reviewer: str
    decided_at: datetime


class TaskRowOut(Schema):
    task: str
    baseline_trace: int | None
    candidate_trace: int | None
    metrics: dict[str, dict[str, float | None]] = Field(description="metric -> baseline, candidate, delta")


class WorseOut(Schema):
    metric: str
    baseline: float
    candidate: float


class RegressedTaskOut(Schema):
    task: str = Field(description="the task's uid, what an approval lists in `acknowledged`")
    worse: list[WorseOut]
    diff_url: str | None


class ShadowOut(Schema):
    requested: int = Field(description="how many of the project's last live selections were asked for")
    replayed: int
    changed: int = Field(description="selections whose bundle the candidate changes")
    errors: int
    summary: str = Field(description='"would change K of N recent bundles"')
    selections: list[dict[str, Any]] = Field(
        description="per selection: trace, changed, entered, left, tokens, leakage, diff (a page link), error"
    )


class BacktestOut(Schema):
    id: int
    url: str
    page_url: str
    proposal_id: int
    proposal_url: str
    project: str
    status: str
    error: str
    baseline_version: int
    candidate_version: int
    condition: str
    engine_version: str
    task_set_digest: str
    task_set_version: str = Field("", description='the project\'s task-set version it replayed: "v3", or "as imported"')
    task_set_version_number: int | None = Field(
        None, description="that version's number; null for a backtest made before versions were recorded"
    )
    created_at: datetime
    finished_at: datetime | None
    progress: ProgressOut
    decision: DecisionOut | None
    approval: ApprovalOut | None = Field(None, description="the latest review (an approval or a rejection)")
    reviews: list[ApprovalOut] = Field(default_factory=list, description="every review, oldest first")
    reviews_summary: str = Field("", description="where the reviews stand against the approval policy")
    review_blockers: list[str]
    regressed_tasks: list[RegressedTaskOut] = Field(
        default_factory=list,
        description="tasks the candidate made worse on any quality metric; approving acknowledges each",
    )
    tasks: list[TaskRowOut]
    shadow: ShadowOut | None = Field(None, description="the shadow replay of recent live selections, once finished")


class ReviewIn(Schema):
    verdict: Literal["approve", "reject"]
    comment: Text = Field("", max_length=20_000, description="required to reject")
    acknowledged: list[Text] = Field(
        default_factory=list,
        max_length=10_000,
        description=(
            "to approve: the uid of every task the backtest made worse (its `regressed_tasks`); "
            "an approval missing one is refused with 422 naming them"
        ),
    )


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


def _gate(row: dict) -> dict:
    return {
        "gate": str(row.get("gate", "")),
        "metric": str(row.get("metric", "")),
        "baseline": row.get("baseline"),
        "candidate": row.get("candidate"),
        "passed": bool(row.get("passed")),
        "reason": str(row.get("reason", "")),
    }


def _review(approval) -> dict:
    return {
        "verdict": approval.verdict,
        "comment": approval.comment,
        "reviewer": approval.reviewer.username,
        "decided_at": approval.decided_at,
    }


def _backtest(backtest) -> dict:
    decision, tally = selectors.backtest_outcome(backtest)
    reviews = sorted((*tally.approvals, *tally.rejections), key=lambda a: (a.decided_at, a.pk))
    progress = selectors.backtest_progress(backtest=backtest)
    return {
        "id": backtest.pk,
        "url": reverse("api-1:backtest", args=[backtest.pk]),
        "page_url": reverse("backtest-detail", args=[backtest.pk]),
        "proposal_id": backtest.proposal_id,
        "proposal_url": reverse("api-1:proposal", args=[backtest.proposal_id]),
        "project": backtest.proposal.project.slug,
        "status": backtest.status,
        "error": backtest.error,
        "baseline_version": backtest.baseline_version.number,
        "candidate_version": backtest.candidate_version.number,
        "condition": backtest.condition,
        "engine_version": backtest.engine_version,
        "task_set_digest": backtest.task_set_digest,
        "task_set_version": task_set_label(
            backtest.task_set_digest, task_set_versions(project=backtest.proposal.project), backtest.task_set_version
        ),
        "task_set_version_number": backtest.task_set_version.number if backtest.task_set_version else None,
        "created_at": backtest.created_at,
        "finished_at": backtest.finished_at,
        "progress": {
            "done": progress.done,
            "total": progress.total,
            "percent": progress.percent,
            "finished": progress.finished,
        },
        "decision": None
        if decision is None
        else {
            "passed": decision.passed,
            "primary_metric": decision.primary_metric,
            "baseline_means": decision.baseline_means,
            "candidate_means": decision.candidate_means,
            "gates": [_gate(g) for g in decision.gate_results],
            "per_task_deltas": decision.per_task_deltas,
            "ablation": decision.ablation,
            "decided_at": decision.decided_at,
        },
        "approval": _review(reviews[-1]) if reviews else None,
        "reviews": [_review(a) for a in reviews],
        "reviews_summary": tally.summary,
        "review_blockers": selectors.review_blockers(backtest=backtest) if decision is not None else [],
        "regressed_tasks": [
            {
                "task": r.task,
                "worse": [{"metric": w.metric, "baseline": w.baseline, "candidate": w.candidate} for w in r.worse],
                "diff_url": r.diff_url,
            }
            for r in review_card.regressed_tasks(backtest=backtest)
        ]
        if decision is not None
        else [],
        "shadow": selectors.shadow_document(backtest) if decision is not None else None,
        "tasks": [
            {
                "task": row.task,
                "baseline_trace": row.baseline_trace,
                "candidate_trace": row.candidate_trace,
                "metrics": {
                    cell.metric: {"baseline": cell.baseline, "candidate": cell.candidate, "delta": cell.delta}
                    for cell in row.cells
                },
            }
            for row in selectors.task_rows(backtest=backtest)
        ],
    }


@router.get("/backtests/{backtest_id}", response=BacktestOut, url_name="backtest", summary="One backtest")
def backtest_detail(request, backtest_id: Id):
    """State and progress while it runs; then the gates with their reasons and per-task deltas."""
    backtest = selectors.backtest_by_id(backtest_id=backtest_id)
    access.access_read(request.auth, backtest.proposal.project)
    return _backtest(backtest)


@router.post(
    "/backtests/{backtest_id}/reviews",
    response={201: BacktestOut},
    url_name="backtest-review",
    summary="Approve or reject a finished backtest",
)
def backtest_review(request, backtest_id: Id, body: ReviewIn):
    backtest = selectors.backtest_by_id(backtest_id=backtest_id)
    services.backtest_review(
        backtest=backtest,
        reviewer=request.auth,
        verdict=body.verdict,
        comment=body.comment,
        acknowledged=body.acknowledged,
    )
    return Status(201, _backtest(selectors.backtest_by_id(backtest_id=backtest_id)))


# --------------------------------------------------------------------------------------------
# Proposals and promotion
# --------------------------------------------------------------------------------------------


def _proposal(proposal) -> dict:
    backtests = selectors.proposal_backtests(proposal=proposal)
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
        "promotion_blockers": governance_selectors.promotion_blockers(proposal=proposal),
        "kind": proposal.kind,
        "supersedes": proposal.supersedes_id,
        "superseded_by": successor.pk if (successor := governance_selectors.proposal_successor(proposal)) else None,
        "restores": proposal.restores.number if proposal.restores_id else None,
        "closed_reason": closure.reason if (closure := governance_selectors.proposal_closure(proposal)) else None,
        "stale_reason": governance_selectors.stale_reason(
            proposal, current=governance_selectors.current_with_proposal(project=proposal.project)
        ),
        "conflicts": [
            {"id": c.proposal.pk, "url": reverse("api-1:proposal", args=[c.proposal.pk]), "keys": list(c.keys)}
            for c in governance_selectors.open_conflicts(
                [proposal], among=governance_selectors.open_proposals(project=proposal.project)
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
    proposal = governance_services.proposal_submit(
        project=project,
        author=request.auth,
        title=body.title,
        rationale=body.rationale,
        patch=body.patch,
        expected_base=expected,
    )
    return Status(201, _proposal(governance_selectors.proposal_by_id(proposal_id=proposal.pk)))


@router.get("/proposals/{proposal_id}", response=ProposalOut, url_name="proposal", summary="One proposal")
def proposal_detail(request, proposal_id: Id):
    proposal = governance_selectors.proposal_by_id(proposal_id=proposal_id)
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
    proposal = governance_selectors.proposal_by_id(proposal_id=proposal_id)
    created = governance_services.proposal_split(proposal=proposal, lead=request.auth)
    return Status(201, [_proposal(governance_selectors.proposal_by_id(proposal_id=p.pk)) for p in created])


@router.post(
    "/proposals/{proposal_id}/promotion",
    response={201: PromotionOut},
    url_name="promotion",
    summary="Promote an approved proposal",
)
def proposal_promote(request, proposal_id: Id):
    proposal = governance_selectors.proposal_by_id(proposal_id=proposal_id)
    promotion = governance_services.proposal_promote(proposal=proposal, lead=request.auth)
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
    proposal = governance_selectors.proposal_by_id(proposal_id=proposal_id)
    rebased = governance_services.proposal_rebase(
        proposal=proposal, author=request.auth, resolutions=dict(body.resolutions)
    )
    return Status(201, _proposal(governance_selectors.proposal_by_id(proposal_id=rebased.pk)))


@router.post(
    "/proposals/{proposal_id}/close", response=ProposalOut, url_name="proposal-close", summary="Close an open proposal"
)
def proposal_close(request, proposal_id: Id, body: CloseIn):
    proposal = governance_selectors.proposal_by_id(proposal_id=proposal_id)
    governance_services.proposal_close(proposal=proposal, lead=request.auth, reason=body.reason)
    return _proposal(governance_selectors.proposal_by_id(proposal_id=proposal_id))


@router.post(
    "/rollbacks", response={201: ProposalOut}, url_name="rollbacks", summary="Propose restoring an earlier version"
)
def proposal_rollback(request, body: RollbackIn):
    """One action: a proposal whose patch restores `version`, backtested and reviewed like any other."""
    project = governance_selectors.project_for_slug(slug=body.project)
    access.access_propose(request.auth, project)
    version = governance_selectors.frame_version(project=project, number=body.version)
    proposal = governance_services.proposal_rollback(
        project=project, author=request.auth, to_version=version, rationale=body.rationale
    )
    return Status(201, _proposal(governance_selectors.proposal_by_id(proposal_id=proposal.pk)))


@router.post(
    "/proposals/{proposal_id}/comments",
    response={201: list[TimelineEventOut]},
    url_name="proposal-comments",
    summary="Comment on a proposal or on one task row of its backtest",
)
def proposal_comment(request, proposal_id: Id, body: CommentIn):
    """Returns the proposal's thread, the new comment last."""
    proposal = governance_selectors.proposal_by_id(proposal_id=proposal_id)
    access.access_comment(request.auth, proposal.project)
    backtest = (
        selectors.proposal_backtest(proposal=proposal, backtest_id=body.backtest) if body.backtest is not None else None
    )
    task_id = selectors.backtest_task_id(backtest=backtest, uid=body.task) if body.task and backtest else None
    services.review_comment(
        proposal=proposal, author=request.auth, body=body.body, backtest=backtest, task_id=task_id
    )
    return Status(201, _timeline(proposal))


def _timeline(proposal) -> list[dict]:
    return [
        {
            "at": e.at, "kind": e.kind, "who": e.who, "text": e.text, "body": e.body, "task": e.task,
            "void": e.void, "links": [{"label": label, "url": url} for label, url in e.links],
        }
        for e in discussion.proposal_timeline(proposal=proposal)
    ]


@router.get(
    "/proposals/{proposal_id}/timeline",
    response=list[TimelineEventOut],
    url_name="proposal-timeline",
    summary="A proposal's discussion and decisions, oldest first",
)
def proposal_timeline(request, proposal_id: Id):
    proposal = governance_selectors.proposal_by_id(proposal_id=proposal_id)
    access.access_read(request.auth, proposal.project)
    return _timeline(proposal)


# --- frame health ------------------------------------------------------------------------------


class HealthGateOut(Schema):
    gate: str
    metric: str
    limit: float | None
    reference: float = Field(description="the mean of the same tasks at their first reading under this frame version")
    value: float
    passed: bool
    reason: str


class HealthReadingOut(Schema):
    at: datetime
    trigger: str = Field(description="schedule, import, task-set, promotion or manual")
    frame_version: int
    task_set_version: int | None = Field(description="None: the task set as imported")
    task_set_digest: str
    tasks: int
    corpus: str
    corpus_revision: int
    engine_version: str
    primary_metric: str
    means: dict[str, float]
    gates: list[HealthGateOut]
    passed: bool
    transition: str = Field(description='"alert" when a gate started failing, "recovered" when all pass again')


@router.get(
    "/projects/{slug}/health",
    response=list[HealthReadingOut],
    url_name="project-health",
    summary="A project's frame health readings, oldest first (the latest 60)",
)
def project_health(request, slug: Text):
    project = governance_selectors.project_for_slug(slug=slug)
    return [
        {
            "at": row.created_at,
            "trigger": row.trigger,
            "frame_version": row.frame_version.number,
            "task_set_version": row.task_set_version,
            "task_set_digest": row.task_set_digest,
            "tasks": row.tasks,
            "corpus": project.corpus.name,
            "corpus_revision": row.corpus_revision,
            "engine_version": row.engine_version,
            "primary_metric": row.primary_metric,
            "means": row.means,
            "gates": row.gate_results,
            "passed": row.passed,
            "transition": row.transition,
        }
        for row in health_selectors.health_history(project=project, user=request.auth)
    ]
