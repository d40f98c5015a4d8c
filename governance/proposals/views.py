"""A proposal's pages: its detail page (backtests, reviews, the thread), the list, and each action on it.

Views parse, call one selector or service, render; the services check the roles (authority.access).
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from authority import access
from authority.errors import GovernanceError
from backtest import selectors as backtest_selectors
from backtest import services as backtest_services
from backtest.errors import BacktestRefused, CommentRefused, RegressionsUnacknowledged, ReviewRefused
from backtest.forms import CommentForm, ReviewForm
from backtest.models import Backtest, BacktestStatus
from backtest.review import card as review_card
from backtest.review import selectors as review_selectors
from backtest.review import services as review_services
from backtest.review import standards as review_standards
from rules import frame_diff
from selection.evaluation.task_sets import task_set_label, task_set_versions

from .. import inbox
from .. import selectors as governance_selectors
from . import promotion, revert, selectors, services, timeline
from .errors import PromotionRefused, ProposalInvalid, RebaseConflict


@login_required
def proposal_detail(
    request, pk: int, review_form: ReviewForm | None = None, status: int = 200, acknowledged: tuple = ()
):
    proposal = selectors.proposal_by_id(proposal_id=pk)
    project = proposal.project
    caps = access.access_read(request.user, project)
    backtests = review_selectors.proposal_backtests(proposal=proposal)
    latest = backtests[0] if backtests else None
    review_blockers = ["no backtest has run yet"]
    if latest:
        review_blockers = review_selectors.review_blockers(backtest=latest, reviewer=request.user)
    policy = review_selectors.project_approval_policy(project=project)
    latest_decision = review_selectors.backtest_decision(latest) if latest else None
    current = selectors.current_with_proposal(project=project)
    stale_reason = selectors.stale_reason(proposal, current=current)
    open_here = selectors.open_proposals(project=project)
    versions = task_set_versions(project=project)
    labels = [task_set_label(b.task_set_digest, versions, b.task_set_version) for b in backtests]
    asked = revert.revert_request_of(proposal)
    return render(
        request,
        "governance/proposal_detail.html",
        {
            "project": project,
            "proposal": proposal,
            "patch_json": json.dumps(proposal.patch, indent=2, sort_keys=True),
            "diff": [
                r
                for r in frame_diff.diff_frames(
                    proposal.base_version.snapshot, proposal.frame_version.snapshot
                )
                if r.changed
            ],
            "backtests": [
                (
                    b,
                    review_selectors.backtest_decision(b),
                    review_selectors.review_tally(b, policy=policy),
                    reverse("backtest-detail", args=[b.pk]),
                    label,
                )
                for b, label in zip(backtests, labels, strict=True)
            ],
            # a comparison of backtests on different task sets says so
            "task_sets_differ": sorted(set(labels)) if len(set(labels)) > 1 else [],
            "latest_task_set": labels[0] if labels else "",
            "latest": latest,
            "review_blockers": review_blockers,
            "review_form": review_form
            or ReviewForm(initial={"backtest": latest.pk if latest else None}),
            "promotion_blockers": selectors.promotion_blockers(proposal=proposal)
            + selectors.promoter_blockers(proposal=proposal, lead=request.user),
            "policy": policy,
            "widens_scope": selectors.scope_widening(proposal=proposal),
            "caps": caps,
            # the review card: the latest decision's gates and every task it made worse
            "latest_decision": latest_decision,
            "stale": inbox.is_stale(proposal, inbox.current_versions([project.pk])),
            "stale_reason": stale_reason,
            # a stale proposal's rebase: the keys the current version also changed, one choice each
            "rebase_conflicts": selectors.rebase_plan(proposal=proposal)[1] if stale_reason else [],
            "open_conflicts": selectors.open_conflicts([proposal], among=open_here).get(proposal.pk, []),
            "closure": selectors.proposal_closure(proposal),
            "superseded_by": selectors.proposal_successor(proposal),
            "timeline": timeline.proposal_timeline(proposal=proposal),
            "comment_form": CommentForm(),
            "current": current,
            # while its backtest runs the page refreshes its backtest part in place
            "live": latest is not None and latest.status in (BacktestStatus.QUEUED, BacktestStatus.RUNNING),
            "regressions": review_card.regressed_tasks(backtest=latest) if latest_decision else [],
            "acknowledged": set(acknowledged),
            "ablation": backtest_selectors.backtest_ablation(backtest=latest, decision=latest_decision),
            "shadow": backtest_selectors.backtest_shadow(backtest=latest) if latest_decision else None,
            "standard": review_standards.standard_sentence(latest) if latest else "",
            # the emergency revert: asked for (by whom, why), and whether this user may confirm it
            "revert": asked,
            "revertable": revert.revertable(proposal),
            "can_confirm_revert": bool(
                asked
                and not asked.confirmed
                and asked.requested_by_id != request.user.pk
                and (caps.can_promote or caps.can_review)
            ),
        },
        status=status,
    )


@login_required
@require_POST
def proposal_review(request, pk: int):
    proposal = selectors.proposal_by_id(proposal_id=pk)
    form = ReviewForm(request.POST)
    acknowledged = tuple(request.POST.getlist("acknowledged"))  # kept ticked through any refusal
    if not form.is_valid():
        return proposal_detail(request, pk, review_form=form, status=400, acknowledged=acknowledged)
    backtest = get_object_or_404(
        Backtest.objects.select_related("proposal__project"),
        pk=form.cleaned_data["backtest"],
        proposal=proposal,
    )
    try:
        # the service checks the role, then that each task that got worse is acknowledged
        review_services.backtest_review(
            backtest=backtest,
            reviewer=request.user,
            verdict=form.cleaned_data["verdict"],
            comment=form.cleaned_data["comment"],
            acknowledged=acknowledged,
        )
    except RegressionsUnacknowledged as error:
        missing = error.tasks
        form.add_error(
            None,
            f"Acknowledge each task that got worse before approving: {', '.join(missing)} "
            f"(tick {'it' if len(missing) == 1 else 'them'} in the review card).",
        )
        return proposal_detail(request, pk, review_form=form, status=400, acknowledged=acknowledged)
    except ReviewRefused as error:
        form.add_error(None, str(error))
        return proposal_detail(request, pk, review_form=form, status=400, acknowledged=acknowledged)
    messages.success(request, f"Backtest #{backtest.pk}: {form.cleaned_data['verdict']} recorded.")
    return redirect("proposal-detail", pk=pk)


@login_required
@require_POST
def proposal_comment(request, pk: int):
    """A comment on the proposal, or (with backtest and task) on one task row of its backtest."""
    proposal = selectors.proposal_by_id(proposal_id=pk)
    access.access_comment(request.user, proposal.project)  # 403 before any word about the form
    form = CommentForm(request.POST)
    back = reverse("proposal-detail", args=[pk]) + "#thread"
    if not form.is_valid():
        messages.error(request, "Not posted: " + "; ".join(e for errors in form.errors.values() for e in errors))
        return redirect(back)
    backtest = None
    if form.cleaned_data["backtest"]:
        backtest = get_object_or_404(Backtest, pk=form.cleaned_data["backtest"], proposal=proposal)
        if form.cleaned_data["task"]:
            back = reverse("backtest-detail", args=[backtest.pk]) + f"#task-{form.cleaned_data['task']}"
    try:
        review_services.review_comment(
            proposal=proposal,
            author=request.user,
            body=form.cleaned_data["body"],
            backtest=backtest,
            task_id=form.cleaned_data["task"],
        )
    except CommentRefused as error:
        messages.error(request, f"Not posted: {error}.")
        return redirect(back)
    messages.success(request, "Comment posted.")
    return redirect(back)


@login_required
@require_POST
def proposal_backtest_start(request, pk: int):
    """"Run backtest" on a proposal without one (fixture proposals, a backtest that errored)."""
    proposal = selectors.proposal_by_id(proposal_id=pk)
    try:
        backtest = backtest_services.backtest_enqueue(
            proposal=proposal, requested_by=request.user, memory_now=request.POST.get("memory") == "now"
        )
    except BacktestRefused as error:
        messages.error(request, f"No backtest started: {error}.")
        return redirect("proposal-detail", pk=pk)
    messages.success(request, f"Backtest #{backtest.pk} started.")
    return redirect("backtest-detail", pk=backtest.pk)


@login_required
def proposal_promote_confirm(request, pk: int):
    """Promotion asks first: this page shows what changes and how the backtest judged it."""
    proposal = selectors.proposal_by_id(proposal_id=pk)
    project = proposal.project
    caps = access.access_promote(request.user, project)
    latest = review_selectors.latest_backtest(proposal=proposal)
    decision = review_selectors.backtest_decision(latest) if latest else None
    return render(
        request,
        "governance/promote_confirm.html",
        {
            "project": project,
            "proposal": proposal,
            "caps": caps,
            "latest": latest,
            "latest_decision": decision,
            "tally": review_selectors.review_tally(latest) if latest else None,
            "regressions": review_card.regressed_tasks(backtest=latest) if decision else [],
            "diff": [
                r
                for r in frame_diff.diff_frames(proposal.base_version.snapshot, proposal.frame_version.snapshot)
                if r.changed
            ],
            "promotion_blockers": selectors.promotion_blockers(proposal=proposal)
            + selectors.promoter_blockers(proposal=proposal, lead=request.user),
        },
    )


@login_required
def proposal_list(request, slug: str):
    project = governance_selectors.project_for_slug(slug=slug)
    caps = access.access_read(request.user, project)
    current = selectors.current_with_proposal(project=project)
    proposals = list(selectors.proposal_rows(project=project))
    conflicts = selectors.open_conflicts(proposals)
    return render(
        request,
        "governance/proposal_list.html",
        {
            "project": project,
            "proposals": [
                (p, selectors.stale_reason(p, current=current), conflicts.get(p.pk, [])) for p in proposals
            ],
            "caps": caps,
        },
    )


@login_required
@require_POST
def proposal_promote(request, pk: int):
    proposal = selectors.proposal_by_id(proposal_id=pk)
    try:
        promoted = promotion.proposal_promote(proposal=proposal, lead=request.user)
    except PromotionRefused as error:
        messages.error(request, str(error))
    else:
        messages.success(
            request,
            f"v{promoted.frame_version.number} is now current for {proposal.project.slug}.",
        )
    return redirect("proposal-detail", pk=pk)


def _resolutions(post) -> dict[str, str]:
    """The author's choice per conflicting key, posted as resolve:<key> = mine | theirs."""
    return {k.removeprefix("resolve:"): v for k, v in post.items() if k.startswith("resolve:")}


@login_required
@require_POST
def proposal_resubmit(request, pk: int):
    """A stale proposal's next step: rebase it over the version current now (a new proposal that
    supersedes it); a key both changed is resolved on its page, one choice per key."""
    stale = selectors.proposal_by_id(proposal_id=pk)
    try:
        proposal = services.proposal_rebase(
            proposal=stale, author=request.user, resolutions=_resolutions(request.POST)
        )
    except RebaseConflict as error:
        messages.error(request, f"Not rebased: {error}.")
        return redirect("proposal-detail", pk=pk)
    except ProposalInvalid as error:
        messages.error(
            request,
            "Not rebased: " + "; ".join(str(issue) for issue in error.issues)
            + ". Propose the change again from the current frame.",
        )
        return redirect("proposal-detail", pk=pk)
    except GovernanceError as error:
        messages.error(request, f"Not rebased: {error}.")
        return redirect("proposal-detail", pk=pk)
    messages.success(
        request,
        f"Resubmitted as proposal #{proposal.pk} over v{proposal.base_version.number}; "
        f"proposal #{stale.pk} is closed and its approvals do not carry over.",
    )
    return redirect("proposal-detail", pk=proposal.pk)


@login_required
@require_POST
def proposal_split(request, pk: int):
    """A proposal whose parts the ablation judged apart: one new proposal per part, each backtested."""
    proposal = selectors.proposal_by_id(proposal_id=pk)
    try:
        created = services.proposal_split(proposal=proposal, lead=request.user)
    except ProposalInvalid as error:
        messages.error(request, "Not split: " + "; ".join(str(issue) for issue in error.issues) + ".")
        return redirect("proposal-detail", pk=pk)
    messages.success(
        request,
        f"Proposal #{proposal.pk} split into "
        + ", ".join(f"#{p.pk} ({p.title})" for p in created)
        + "; each has its own backtest.",
    )
    return redirect("proposal-detail", pk=created[0].pk)


@login_required
@require_POST
def proposal_close(request, pk: int):
    proposal = selectors.proposal_by_id(proposal_id=pk)
    try:
        services.proposal_close(proposal=proposal, lead=request.user, reason=request.POST.get("reason", ""))
    except ProposalInvalid as error:
        messages.error(request, "Not closed: " + "; ".join(i.message for i in error.issues) + ".")
    except GovernanceError as error:
        messages.error(request, f"Not closed: {error}.")
    else:
        messages.success(request, f"Proposal #{proposal.pk} is closed.")
    return redirect("proposal-detail", pk=pk)
