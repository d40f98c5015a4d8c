"""Writing a proposal: the editor (or a JSON patch), its preview, and a rollback to an earlier version."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from authority import access
from authority.errors import GovernanceError
from authority.selectors import current_frame_version
from selection.corpus.limits import MAX_INTEGER

from .. import selectors as governance_selectors
from ..forms import ProposeForm
from . import promotion, selectors, services
from .errors import ProposalInvalid


@login_required
def proposal_create(request, slug: str):
    project = governance_selectors.project_for_slug(slug=slug)
    caps = access.access_read(request.user, project)
    base = current_frame_version(project=project)
    if base is None:
        raise Http404(f"{project.slug} has no promoted frame version")
    declared = governance_selectors.declared_projects(project=project)
    known = governance_selectors.carried_classes(scope=[*declared, project.slug])
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
            except ProposalInvalid as error:
                form.add_issues(error.issues)
            except GovernanceError as error:
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
    project = governance_selectors.project_for_slug(slug=slug)
    access.access_read(request.user, project)
    base = current_frame_version(project=project)
    if base is None:
        raise Http404(f"{project.slug} has no promoted frame version")
    declared = governance_selectors.declared_projects(project=project)
    data = request.POST.copy()
    data["title"] = data.get("title") or "(preview)"  # an untitled draft still shows its patch
    form = ProposeForm(
        data,
        base=base.snapshot,
        declared=declared,
        known_classes=governance_selectors.carried_classes(scope=[*declared, project.slug]),
    )
    valid = form.is_valid()
    return render(
        request,
        "governance/_patch_preview.html",
        {"form": form, "valid": valid, "patch": json.dumps(form.patch, indent=2, sort_keys=True) if valid else ""},
    )


@login_required
@require_POST
def proposal_rollback(request, slug: str):
    """One action: a proposal restoring an earlier version, backtested and reviewed like any other."""
    project = governance_selectors.project_for_slug(slug=slug)
    try:
        number = int(request.POST.get("version", ""))
    except ValueError:
        number = 0
    if not 0 < number <= MAX_INTEGER:
        messages.error(request, "Not rolled back: choose a version number from the history.")
        return redirect("project-detail", slug=slug)
    version = governance_selectors.frame_version(project=project, number=number)
    try:
        proposal = promotion.proposal_rollback(
            project=project, author=request.user, to_version=version, rationale=request.POST.get("rationale", "")
        )
    except ProposalInvalid as error:
        messages.error(request, "Not rolled back: " + "; ".join(str(i) for i in error.issues) + ".")
        return redirect("project-detail", slug=slug)
    messages.success(request, f"Proposal #{proposal.pk} restores v{number}; its backtest has started.")
    return redirect("proposal-detail", pk=proposal.pk)
