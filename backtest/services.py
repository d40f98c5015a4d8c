"""Backtest writes: start one (its ablation plan, its shadow replay, the chord on commit), re-run a failed one.

Each write and its audit row share one transaction.atomic; the Celery chord is sent on commit.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from authority import access
from authority.audit import audit_record
from authority.selectors import current_frame_version
from authority.states import ProposalState
from rules import ablation as ablation_rules
from rules import frame_patch as frame_rules
from rules import gate_verdict as gate_rules
from selection.engine.pipeline import ENGINE_VERSION
from selection.evaluation.task_sets import project_tasks, task_set_version_record, tasks_digest
from selection.models import Project

from .errors import BacktestRefused
from .judging import backtest_fail
from .lifecycle import backtest_changed
from .models import (
    AblationReplay,
    Backtest,
    BacktestStatus,
    ShadowReplay,
    TaskReplay,
)
from .replay.dispatch import launch_chord, replays_done, replays_expected
from .replay.services import CONDITION, variant_frame
from .replay.shadow import shadow_plan
from .review.standards import standard_for
from .selectors import declared_projects

logger = logging.getLogger(__name__)


def _gates_of(snapshot: dict) -> dict:
    gates = dict(snapshot.get("gates") or {})
    gates.setdefault("primary", gate_rules.DEFAULT_PRIMARY)
    gates.setdefault("min_improvement", 0.0)
    gates.setdefault("limits", [])
    return gates


def ablation_plan(proposal) -> dict:
    """What a backtest of `proposal` ablates: {"parts", "variants", "note"}, or {} for one part.

    Parts ≥ 2 and ≤ MAX_ABLATION_PARTS are ablated; more are backtested whole and the note says
    so, as it does when some variant is not a valid frame on its own.
    """
    parts = frame_rules.patch_parts(proposal.patch)
    if len(parts) < 2:
        return {}
    limit = frame_rules.MAX_ABLATION_PARTS
    if len(parts) > limit:
        note = f"{len(parts)} parts, more than the {limit} an ablation replays: backtested whole only"
        return {"parts": parts, "variants": [], "note": note}
    chosen = ablation_rules.plan(parts)
    declared = declared_projects(project=proposal.project)
    for included in chosen.variants:
        issues = frame_rules.frame_issues(
            variant_frame(proposal, included), project=proposal.project.slug, declared=declared
        )
        if issues:
            note = f"{' + '.join(included)} alone is not a valid frame ({issues[0]}): backtested whole only"
            return {"parts": parts, "variants": [], "note": note}
    return {"parts": parts, "variants": [list(v) for v in chosen.variants], "note": ""}


def backtest_enqueue(
    *,
    proposal,
    requested_by=None,
    shadow: int | None = None,
    after_promotion: bool = False,
    memory_now: bool = False,
) -> Backtest:
    """Start a backtest of `proposal` against the current promoted version; the chord runs on commit.

    `requested_by` None is the system (the CLI, a re-run); a user needs the lead role. `shadow`:
    how many of the project's last live selections it also replays (None: FG_BACKTEST_SHADOW).
    `after_promotion`: the backtest of an emergency revert, promoted already: it replays against
    the version the proposal replaced (its base), not the current one (itself).
    `memory_now`: replay every task against memory as of now, instead of memory as of the
    sequence each task was made at (the default: the frame's change alone, memory held still).
    """
    project = proposal.project
    if requested_by is not None:
        access.access_backtest(requested_by, project)
    with transaction.atomic():
        # the baseline cannot move while the backtest row is written
        Project.objects.select_for_update().get(pk=project.pk)
        proposal = type(proposal).objects.select_related("frame_version", "project", "base_version").get(pk=proposal.pk)
        if proposal.state == ProposalState.PROMOTED and not after_promotion:
            raise BacktestRefused(f"proposal #{proposal.pk} is already promoted")
        if proposal.state == ProposalState.CLOSED:
            raise BacktestRefused(f"proposal #{proposal.pk} is closed")
        baseline = proposal.base_version if after_promotion else current_frame_version(project=project)
        if baseline is None:
            raise BacktestRefused(f"{project.slug} has no promoted frame version to compare with")
        tasks = project_tasks(project)
        if not tasks:
            raise BacktestRefused(f"{project.slug} has no task to replay")
        candidate = proposal.frame_version
        standard = standard_for(proposal=proposal, baseline=baseline, task_ids=[t["id"] for t in tasks])
        # the ablation judges each part by a rise: a no-worse or review-only change is judged whole
        ablation = ablation_plan(proposal) if standard["name"] == "superiority" else {}
        shadows = shadow_plan(project, shadow)
        digest = tasks_digest(tasks)
        # the version it names (recorded now if the set is new; the project's row lock is held)
        task_set = task_set_version_record(project=project, digest=digest, tasks=len(tasks))
        backtest = Backtest.objects.create(
            proposal=proposal,
            baseline_version=baseline,
            candidate_version=candidate,
            condition=CONDITION,
            task_ids=[t["id"] for t in tasks],
            task_set_digest=digest,
            task_set_version=task_set,
            engine_version=ENGINE_VERSION,
            # the standard its kind of change is held to, and what it is judged against
            gates={**_gates_of(baseline.snapshot), "standard": standard},
            requested_by=requested_by,
            status=BacktestStatus.QUEUED,
            ablation=ablation,
            shadow=shadows,
            memory_now=bool(memory_now),
        )
        audit_record(
            actor=requested_by,
            project=project,
            action="backtest.started",
            obj=backtest,
            summary=(
                f"backtest #{backtest.pk} of proposal #{proposal.pk}: v{candidate.number} against "
                f"v{baseline.number} over {len(tasks)} tasks (task set v{task_set.number})"
            ),
            payload={
                "proposal": proposal.pk,
                "baseline_version": baseline.number,
                "candidate_version": candidate.number,
                "condition": CONDITION,
                "tasks": len(tasks),
                "task_set_digest": backtest.task_set_digest,
                "task_set_version": task_set.number,
                "memory": "now" if memory_now else "as of each task",
                "engine_version": ENGINE_VERSION,
                "gates": backtest.gates,
                "ablation": ablation,
                "shadow": shadows,
            },
        )
        backtest_changed.send(sender=Backtest, backtest=backtest)
        backtest_id = backtest.pk
        transaction.on_commit(lambda: _launch(backtest_id))
    return backtest


def _launch(backtest_id: int) -> None:
    try:
        launch_chord(backtest_id)
    except Exception as error:  # the broker is down or refused: say so on the backtest
        logger.exception("backtest #%s could not be queued", backtest_id)
        backtest_fail(backtest_id=backtest_id, error=f"could not queue the replays: {error}")


def stale_after() -> timedelta:
    return timedelta(seconds=settings.FG_BACKTEST_STALE_SECONDS)


def backtest_stale_reason(backtest: Backtest, *, now=None) -> str | None:
    """The rule: a queued or running backtest with no new replay for FG_BACKTEST_STALE_SECONDS
    (since it was queued or since its latest replay) has lost its workers or its messages."""
    if backtest.status not in (BacktestStatus.QUEUED, BacktestStatus.RUNNING):
        return None
    latest = TaskReplay.objects.filter(backtest=backtest).aggregate(at=Max("created_at"))["at"]
    latest_variant = AblationReplay.objects.filter(backtest=backtest).aggregate(at=Max("created_at"))["at"]
    latest_shadow = ShadowReplay.objects.filter(backtest=backtest).aggregate(at=Max("created_at"))["at"]
    last_progress = max(filter(None, [backtest.created_at, latest, latest_variant, latest_shadow]))
    idle = (now or timezone.now()) - last_progress
    if idle < stale_after():
        return None
    return (
        f"stale: no replay for {int(idle.total_seconds())} s ({replays_done(backtest)} of "
        f"{replays_expected(backtest)} done); its workers vanished or its messages were lost"
    )


def backtest_fail_if_stale(*, backtest: Backtest) -> Backtest:
    """Apply the stale rule (on page load and in `backtest` waits): mark it failed, with why."""
    reason = backtest_stale_reason(backtest)
    if reason is None:
        return backtest
    return backtest_fail(backtest_id=backtest.pk, error=reason)


def backtest_rerun(*, backtest: Backtest, lead) -> Backtest:
    """A lead starts the proposal again after a failed (errored or stale) backtest."""
    access.access_backtest(lead, backtest.proposal.project)
    backtest = backtest_fail_if_stale(backtest=backtest)
    if backtest.status != BacktestStatus.ERROR:
        raise BacktestRefused(
            f"backtest #{backtest.pk} is {backtest.status}: only a failed or stale backtest is re-run"
        )
    latest = Backtest.objects.filter(proposal_id=backtest.proposal_id).order_by("-created_at", "-id").first()
    if latest is not None and latest.pk != backtest.pk:
        raise BacktestRefused(f"backtest #{latest.pk} is newer: re-run the latest only")
    return backtest_enqueue(proposal=backtest.proposal, requested_by=lead, memory_now=backtest.memory_now)
