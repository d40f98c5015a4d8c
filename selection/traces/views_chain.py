"""The chain page: re-verify the trace hash chain of every project the user may read."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from authority import access
from selection.models import Project
from selection.traces.chain import verify_chains


@login_required
def trace_chain(request):
    projects = access.readable_projects(request.user, Project.objects.all()).order_by("slug")
    slug = (request.GET.get("project") or "").strip()
    if slug:
        projects = projects.filter(slug=slug)
    reports = verify_chains(projects)
    return render(
        request,
        "selection/trace_chain.html",
        {
            "reports": reports,
            "broken": sum(len(r.broken) for r in reports),
            "project": slug,
        },
    )
