"""Dashboard pages of the governance app; views parse, call one selector or service, render.

Role checks happen in authority.access only: reads call access_read, writes reach the access_*
check inside the service they call. A proposal's pages are in proposals/, the API tokens page in
tokens/, the webhooks page in webhooks/.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import render

from authority import access
from authority.selectors import current_frame_version
from backtest.health.selectors import health_panel
from rules import frame_diff as frames
from selection.corpus.limits import MAX_INTEGER
from selection.engine.explain.frame_words import frame_settings
from selection.models import Project

from . import inbox, selectors
from .forms import AuditFilterForm

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
            "settings": frame_settings(current.snapshot) if current else (),
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


