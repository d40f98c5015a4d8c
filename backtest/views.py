"""Backtest pages: the detail page and its live fragment, polled by htmx while replays run, and
the proposal page, which shows a proposal's backtests and takes the reviewer's verdict.

Views parse, check access_read, call selectors or one service, render; a verdict goes through the
one backtest_review service, which checks the reviewer role itself.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_POST

from authority import access
from governance import frames, inbox
from governance import selectors as governance_selectors
from selection.evaluation.task_sets import task_set_label, task_set_versions

from . import discussion, review_card, selectors, services
from .forms import CommentForm, ReviewForm
from .models import Backtest, BacktestStatus


def _url(name: str, *args) -> str | None:
    # the trace explorer provides these pages; until a name resolves, the page shows no link
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def _trace_links(rows):
    detail = _url("trace-detail", 0) is not None
    diff = _url("trace-diff")
    links = []
    for row in rows:
        links.append(
            {
                "baseline": _url("trace-detail", row.baseline_trace) if detail and row.baseline_trace else None,
                "candidate": _url("trace-detail", row.candidate_trace) if detail and row.candidate_trace else None,
                "diff": f"{diff}?a={row.baseline_trace}&b={row.candidate_trace}"
                if diff and row.baseline_trace and row.candidate_trace
                else None,
            }
        )
    return list(zip(rows, links, strict=True))


def _with_comments(rows, backtest):
    """Each task row's links also carry the discussion on that row (one query for all rows)."""
    comments = discussion.task_comments(backtest=backtest)
    for row, links in rows:
        links["comments"] = comments.get(row.task_id, [])
    return rows


def _context(request, pk: int) -> dict:
    backtest = selectors.backtest_by_id(backtest_id=pk)
    proposal = backtest.proposal
    caps = access.access_read(request.user, proposal.project)
    if services.backtest_stale_reason(backtest) is not None:
        # the stale rule runs on every load of the page (and its live fragment)
        services.backtest_fail_if_stale(backtest=backtest)
        backtest = selectors.backtest_by_id(backtest_id=pk)
    decision, tally = selectors.backtest_outcome(backtest)
    metrics = selectors.page_metrics(backtest)
    progress = selectors.backtest_progress(backtest=backtest)
    blockers = selectors.review_blockers(backtest=backtest, reviewer=request.user) if decision is not None else []
    return {
        "backtest": backtest,
        "proposal": proposal,
        "project": proposal.project,
        "caps": caps,
        "progress": progress,
        "decision": decision,
        "tally": tally,
        "metrics": metrics,
        "rows": _with_comments(_trace_links(selectors.task_rows(backtest=backtest)), backtest),
        "chart": selectors.decision_chart(decision=decision, metrics=metrics),
        "review_blockers": blockers,
        "review_form": ReviewForm(initial={"backtest": backtest.pk}),
        "can_rerun": caps.can_propose and backtest.status == BacktestStatus.ERROR,
        "task_set": task_set_label(
            backtest.task_set_digest, task_set_versions(project=proposal.project), backtest.task_set_version
        ),
        "regressions": review_card.regressed_tasks(backtest=backtest) if decision is not None else [],
        "ablation": selectors.backtest_ablation(backtest=backtest, decision=decision),
        "shadow": selectors.backtest_shadow(backtest=backtest) if decision is not None else None,
    }


@login_required
def backtest_detail(request, pk: int):
    return render(request, "backtest/backtest_detail.html", _context(request, pk))


@login_required
def backtest_live(request, pk: int):
    """The part of the page that changes while the backtest runs (progress, then the decision)."""
    return render(request, "backtest/_live.html", _context(request, pk))


def _backtest_url(backtest: Backtest) -> str:
    return reverse("backtest-detail", args=[backtest.pk])


@login_required
def proposal_detail(
    request, pk: int, review_form: ReviewForm | None = None, status: int = 200, acknowledged: tuple = ()
):
    proposal = governance_selectors.proposal_by_id(proposal_id=pk)
    project = proposal.project
    caps = access.access_read(request.user, project)
    backtests = selectors.proposal_backtests(proposal=proposal)
    latest = backtests[0] if backtests else None
    review_blockers = (
        selectors.review_blockers(backtest=latest, reviewer=request.user) if latest else ["no backtest has run yet"]
    )
    policy = selectors.project_approval_policy(project=project)
    latest_decision = selectors.backtest_decision(latest) if latest else None
    current = governance_selectors.current_with_proposal(project=project)
    stale_reason = governance_selectors.stale_reason(proposal, current=current)
    open_here = governance_selectors.open_proposals(project=project)
    versions = task_set_versions(project=project)
    labels = [task_set_label(b.task_set_digest, versions, b.task_set_version) for b in backtests]
    return render(
        request,
        "governance/proposal_detail.html",
        {
            "project": project,
            "proposal": proposal,
            "patch_json": json.dumps(proposal.patch, indent=2, sort_keys=True),
            "diff": [
                r
                for r in frames.diff_frames(
                    proposal.base_version.snapshot, proposal.frame_version.snapshot
                )
                if r.changed
            ],
            "backtests": [
                (
                    b,
                    selectors.backtest_decision(b),
                    selectors.review_tally(b, policy=policy),
                    _backtest_url(b),
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
            "promotion_blockers": governance_selectors.promotion_blockers(proposal=proposal)
            + governance_selectors.promoter_blockers(proposal=proposal, lead=request.user),
            "policy": policy,
            "widens_scope": governance_selectors.scope_widening(proposal=proposal),
            "caps": caps,
            # the review card: the latest decision's gates and every task it made worse
            "latest_decision": latest_decision,
            "stale": inbox.is_stale(proposal, inbox.current_versions([project.pk])),
            "stale_reason": stale_reason,
            # a stale proposal's rebase: the keys the current version also changed, one choice each
            "rebase_conflicts": governance_selectors.rebase_plan(proposal=proposal)[1] if stale_reason else [],
            "open_conflicts": governance_selectors.open_conflicts([proposal], among=open_here).get(proposal.pk, []),
            "closure": governance_selectors.proposal_closure(proposal),
            "superseded_by": governance_selectors.proposal_successor(proposal),
            "timeline": discussion.proposal_timeline(proposal=proposal),
            "comment_form": CommentForm(),
            "current": current,
            # while its backtest runs the page refreshes its backtest part in place
            "live": latest is not None and latest.status in (BacktestStatus.QUEUED, BacktestStatus.RUNNING),
            "regressions": review_card.regressed_tasks(backtest=latest) if latest_decision else [],
            "acknowledged": set(acknowledged),
            "ablation": selectors.backtest_ablation(backtest=latest, decision=latest_decision),
            "shadow": selectors.backtest_shadow(backtest=latest) if latest_decision else None,
        },
        status=status,
    )


@login_required
@require_POST
def proposal_review(request, pk: int):
    proposal = governance_selectors.proposal_by_id(proposal_id=pk)
    form = ReviewForm(request.POST)
    if not form.is_valid():
        return proposal_detail(request, pk, review_form=form, status=400)
    backtest = get_object_or_404(
        Backtest.objects.select_related("proposal__project"),
        pk=form.cleaned_data["backtest"],
        proposal=proposal,
    )
    acknowledged = tuple(request.POST.getlist("acknowledged"))
    try:
        # the service checks the role, then that each task that got worse is acknowledged
        services.backtest_review(
            backtest=backtest,
            reviewer=request.user,
            verdict=form.cleaned_data["verdict"],
            comment=form.cleaned_data["comment"],
            acknowledged=acknowledged,
        )
    except services.RegressionsUnacknowledged as error:
        missing = error.tasks
        form.add_error(
            None,
            f"Acknowledge each task that got worse before approving: {', '.join(missing)} "
            f"(tick {'it' if len(missing) == 1 else 'them'} in the review card).",
        )
        return proposal_detail(request, pk, review_form=form, status=400, acknowledged=acknowledged)
    except services.ReviewRefused as error:
        form.add_error(None, str(error))
        return proposal_detail(request, pk, review_form=form, status=400)
    messages.success(request, f"Backtest #{backtest.pk}: {form.cleaned_data['verdict']} recorded.")
    return redirect("proposal-detail", pk=pk)


@login_required
@require_POST
def proposal_comment(request, pk: int):
    """A comment on the proposal, or (with backtest and task) on one task row of its backtest."""
    proposal = governance_selectors.proposal_by_id(proposal_id=pk)
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
        services.review_comment(
            proposal=proposal,
            author=request.user,
            body=form.cleaned_data["body"],
            backtest=backtest,
            task_id=form.cleaned_data["task"],
        )
    except services.CommentRefused as error:
        messages.error(request, f"Not posted: {error}.")
        return redirect(back)
    messages.success(request, "Comment posted.")
    return redirect(back)


@login_required
@require_POST
def backtest_rerun(request, pk: int):
    backtest = selectors.backtest_by_id(backtest_id=pk)
    access.access_propose(request.user, backtest.proposal.project)
    try:
        again = services.backtest_rerun(backtest=backtest, lead=request.user)
    except services.BacktestRefused as error:
        messages.error(request, str(error))
        return redirect("backtest-detail", pk=pk)
    messages.success(request, f"Backtest #{again.pk} started again for proposal #{again.proposal_id}.")
    return redirect("backtest-detail", pk=again.pk)


@login_required
@require_POST
def proposal_backtest_start(request, pk: int):
    """"Run backtest" on a proposal without one (fixture proposals, a backtest that errored)."""
    proposal = governance_selectors.proposal_by_id(proposal_id=pk)
    try:
        backtest = services.backtest_enqueue(proposal=proposal, requested_by=request.user)
    except services.BacktestRefused as error:
        messages.error(request, f"No backtest started: {error}.")
        return redirect("proposal-detail", pk=pk)
    messages.success(request, f"Backtest #{backtest.pk} started.")
    return redirect("backtest-detail", pk=backtest.pk)


@login_required
def proposal_promote_confirm(request, pk: int):
    """Promotion asks first: this page shows what changes and how the backtest judged it."""
    proposal = governance_selectors.proposal_by_id(proposal_id=pk)
    project = proposal.project
    caps = access.access_promote(request.user, project)
    latest = selectors.latest_backtest(proposal=proposal)
    decision = selectors.backtest_decision(latest) if latest else None
    return render(
        request,
        "backtest/promote_confirm.html",
        {
            "project": project,
            "proposal": proposal,
            "caps": caps,
            "latest": latest,
            "latest_decision": decision,
            "tally": selectors.review_tally(latest) if latest else None,
            "regressions": review_card.regressed_tasks(backtest=latest) if decision else [],
            "diff": [
                r
                for r in frames.diff_frames(proposal.base_version.snapshot, proposal.frame_version.snapshot)
                if r.changed
            ],
            "promotion_blockers": governance_selectors.promotion_blockers(proposal=proposal)
            + governance_selectors.promoter_blockers(proposal=proposal, lead=request.user),
        },
    )
