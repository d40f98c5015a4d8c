"""Backtest pages: the detail page and its live fragment, polled by htmx while replays run, and
the proposal page, which shows a proposal's backtests and takes the reviewer's verdict.

Views parse, check access_read, call selectors or one service, render; a verdict goes through the
one backtest_review service, which checks the reviewer role itself.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_POST

from authority import access
from selection.evaluation.task_sets import task_set_label, task_set_versions

from . import selectors, services
from .errors import BacktestRefused
from .forms import ReviewForm
from .models import BacktestStatus
from .review import card as review_card
from .review import selectors as review_selectors


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
    comments = review_selectors.task_comments(backtest=backtest)
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
    blockers = []
    if decision is not None:
        blockers = review_selectors.review_blockers(backtest=backtest, reviewer=request.user)
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


@login_required
@require_POST
def backtest_rerun(request, pk: int):
    backtest = selectors.backtest_by_id(backtest_id=pk)
    access.access_backtest(request.user, backtest.proposal.project)
    try:
        again = services.backtest_rerun(backtest=backtest, lead=request.user)
    except BacktestRefused as error:
        messages.error(request, str(error))
        return redirect("backtest-detail", pk=pk)
    messages.success(request, f"Backtest #{again.pk} started again for proposal #{again.proposal_id}.")
    return redirect("backtest-detail", pk=again.pk)


