"""Dashboard pages of the governance app; views parse, call one selector or service, render.

Role checks happen in authority.access only: reads call access_read, writes reach the access_*
check inside the service they call. The proposal page, which shows backtests and takes reviews,
is assembled in backtest.views: governance sits below the backtest app.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from authority import access
from authority.selectors import current_frame_version
from selection.corpus.limits import MAX_INTEGER
from selection.models import Project

from . import frames, inbox, selectors, services, webhooks
from .forms import AuditFilterForm, ProposeForm
from .health import health_panel

AUDIT_PAGE_SIZE = 50


@login_required
def home(request):
    return render(
        request,
        "governance/home.html",
        {"projects": selectors.project_overview(user=request.user), "inbox": inbox.inbox_for(request.user)},
    )


@login_required
def project_detail(request, slug: str):
    project = selectors.project_for_slug(slug=slug)
    caps = access.access_read(request.user, project)
    current = current_frame_version(project=project)
    return render(
        request,
        "governance/project_detail.html",
        {
            "project": project,
            "current": current,
            "frame": selectors.frame_view(current.snapshot) if current else None,
            "history": selectors.frame_history_tree(project=project),
            "caps": caps,
            "health": health_panel(project=project, user=request.user),
        },
    )


def _version_number(request, name: str) -> int:
    try:
        number = int(request.GET.get(name, ""))
    except ValueError:
        raise Http404(f"?{name}= must be a version number") from None
    if not 0 < number <= MAX_INTEGER:
        raise Http404(f"?{name}= must be a version number")
    return number


@login_required
def frame_diff(request, slug: str):
    project = selectors.project_for_slug(slug=slug)
    access.access_read(request.user, project)
    a = selectors.frame_version(project=project, number=_version_number(request, "a"))
    b = selectors.frame_version(project=project, number=_version_number(request, "b"))
    rows = frames.diff_frames(a.snapshot, b.snapshot)
    return render(
        request,
        "governance/frame_diff.html",
        {"project": project, "a": a, "b": b, "rows": rows, "changed": sum(r.changed for r in rows)},
    )


@login_required
def proposal_create(request, slug: str):
    project = selectors.project_for_slug(slug=slug)
    caps = access.access_read(request.user, project)
    base = current_frame_version(project=project)
    if base is None:
        raise Http404(f"{project.slug} has no promoted frame version")
    declared = selectors.declared_projects(project=project)
    known = selectors.carried_classes(scope=[*declared, project.slug])
    # "revise": an open proposal's change, edited (or split) into a new proposal that replaces it
    revises = _revised(request, project)
    if request.method == "POST":
        form = ProposeForm(request.POST, base=base.snapshot, declared=declared, known_classes=known)
        if form.is_valid():
            try:
                proposal = services.proposal_submit(
                    project=project,
                    author=request.user,
                    title=form.cleaned_data["title"],
                    rationale=form.cleaned_data["rationale"],
                    patch=form.patch,
                    expected_base=base,
                    supersedes=revises,
                )
            except services.ProposalInvalid as error:
                form.add_issues(error.issues)
            except services.GovernanceError as error:
                form.add_error(None, str(error))
            else:
                messages.success(
                    request, f"Proposal #{proposal.pk} stored as v{proposal.frame_version.number}."
                )
                for warning in proposal.warnings:
                    messages.warning(request, f"Warning: {warning}")
                return redirect("proposal-detail", pk=proposal.pk)
    else:
        initial = {}
        if revises is not None:
            initial = {
                "title": revises.title,
                "rationale": revises.rationale,
                "raw_patch": json.dumps(revises.patch, indent=2, sort_keys=True),
            }
        form = ProposeForm(base=base.snapshot, declared=declared, known_classes=known, initial=initial)
    return render(
        request,
        "governance/proposal_form.html",
        {
            "project": project, "base": base, "form": form, "caps": caps, "corpus_classes": sorted(known),
            "revises": revises,
        },
        # a refused proposal is the client's error: say so to scripts as well as to people
        status=400 if request.method == "POST" else 200,
    )


def _revised(request, project):
    """The open proposal named by ?revises= (GET) or the revises field (POST), or None."""
    raw = request.POST.get("revises") if request.method == "POST" else request.GET.get("revises")
    if not raw:
        return None
    try:
        pk = int(raw)
    except ValueError:
        raise Http404("revises= must be a proposal number") from None
    if not 0 < pk <= MAX_INTEGER:
        raise Http404("revises= must be a proposal number")
    revised = selectors.proposal_by_id(proposal_id=pk)
    if revised.project_id != project.pk:
        raise Http404(f"proposal #{pk} is not a proposal of {project.slug}")
    return revised


@login_required
@require_POST
def proposal_preview(request, slug: str):
    """The editor's live merge patch: the form as it stands, parsed, never stored."""
    project = selectors.project_for_slug(slug=slug)
    access.access_read(request.user, project)
    base = current_frame_version(project=project)
    if base is None:
        raise Http404(f"{project.slug} has no promoted frame version")
    declared = selectors.declared_projects(project=project)
    data = request.POST.copy()
    data["title"] = data.get("title") or "(preview)"  # an untitled draft still shows its patch
    form = ProposeForm(
        data,
        base=base.snapshot,
        declared=declared,
        known_classes=selectors.carried_classes(scope=[*declared, project.slug]),
    )
    valid = form.is_valid()
    return render(
        request,
        "governance/_patch_preview.html",
        {"form": form, "valid": valid, "patch": json.dumps(form.patch, indent=2, sort_keys=True) if valid else ""},
    )


@login_required
def proposal_list(request, slug: str):
    project = selectors.project_for_slug(slug=slug)
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
        promotion = services.proposal_promote(proposal=proposal, lead=request.user)
    except services.PromotionRefused as error:
        messages.error(request, str(error))
    else:
        messages.success(
            request,
            f"v{promotion.frame_version.number} is now current for {proposal.project.slug}.",
        )
    return redirect("proposal-detail", pk=pk)


@login_required
def audit_log(request):
    readable = list(access.readable_projects(request.user, Project.objects.all()).order_by("slug"))
    form = AuditFilterForm(
        request.GET or None, projects=[p.slug for p in readable], actions=selectors.audit_actions()
    )
    filters = selectors.AuditFilters()
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        filters = selectors.AuditFilters(
            project=next((p for p in readable if p.slug == data["project"]), None),
            action=data["action"],
            actor=data["actor"].strip(),
            since=data["since"],
            until=data["until"],
        )
    page = Paginator(
        selectors.audit_entries(user=request.user, filters=filters), AUDIT_PAGE_SIZE
    ).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "governance/audit_log.html",
        {"form": form, "page": page, "query": query.urlencode()},
    )


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
    except services.RebaseConflict as error:
        messages.error(request, f"Not rebased: {error}.")
        return redirect("proposal-detail", pk=pk)
    except services.ProposalInvalid as error:
        messages.error(
            request,
            "Not rebased: " + "; ".join(str(issue) for issue in error.issues)
            + ". Propose the change again from the current frame.",
        )
        return redirect("proposal-detail", pk=pk)
    except services.GovernanceError as error:
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
    except services.ProposalInvalid as error:
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
    except services.ProposalInvalid as error:
        messages.error(request, "Not closed: " + "; ".join(i.message for i in error.issues) + ".")
    except services.GovernanceError as error:
        messages.error(request, f"Not closed: {error}.")
    else:
        messages.success(request, f"Proposal #{proposal.pk} is closed.")
    return redirect("proposal-detail", pk=pk)


@login_required
@require_POST
def proposal_rollback(request, slug: str):
    """One action: a proposal restoring an earlier version, backtested and reviewed like any other."""
    project = selectors.project_for_slug(slug=slug)
    try:
        number = int(request.POST.get("version", ""))
    except ValueError:
        number = 0
    if not 0 < number <= MAX_INTEGER:
        messages.error(request, "Not rolled back: choose a version number from the history.")
        return redirect("project-detail", slug=slug)
    version = selectors.frame_version(project=project, number=number)
    try:
        proposal = services.proposal_rollback(
            project=project, author=request.user, to_version=version, rationale=request.POST.get("rationale", "")
        )
    except services.ProposalInvalid as error:
        messages.error(request, "Not rolled back: " + "; ".join(str(i) for i in error.issues) + ".")
        return redirect("project-detail", slug=slug)
    messages.success(request, f"Proposal #{proposal.pk} restores v{number}; its backtest has started.")
    return redirect("proposal-detail", pk=proposal.pk)


@login_required
def project_webhooks(request, slug: str):
    """A lead's page: the project's signed webhooks, adding one, and the log of every delivery."""
    project = selectors.project_for_slug(slug=slug)
    caps = access.access_promote(request.user, project)
    error, status = "", 200
    if request.method == "POST":
        try:
            endpoint = webhooks.webhook_create(
                project=project, lead=request.user, url=request.POST.get("url", ""),
                events=request.POST.getlist("events"),
            )
        except services.InputRefused as refused:
            error, status = str(refused), 400
        else:
            messages.success(request, f"Webhook #{endpoint.pk} added: it receives {', '.join(endpoint.events)}.")
            return redirect("project-webhooks", slug=slug)
    endpoints, deliveries = webhooks.project_webhooks(project=project)
    return render(
        request,
        "governance/webhooks.html",
        {
            "project": project, "caps": caps, "endpoints": endpoints, "deliveries": deliveries,
            "event_names": webhooks.EVENT_NAMES, "error": error,
        },
        status=status,
    )
