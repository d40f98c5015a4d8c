"""The retention page of a project: how long each origin's traces keep their payload; a lead changes it.

The view parses and calls selection.traces.retention.retention_policy_set, which checks the lead role.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from authority import access
from selection.models import Project, RetentionOrigin
from selection.traces.retention import MAX_RETENTION_DAYS, RetentionRefused, retention_policy, retention_policy_set

FIELDS = tuple(f"{origin.value}_days" for origin in RetentionOrigin)


@login_required
@require_http_methods(["GET", "POST"])
def project_retention(request, slug: str):
    project = get_object_or_404(Project.objects.select_related("corpus"), slug=slug)
    caps = access.access_read(request.user, project)
    error, status = "", 200
    if request.method == "POST":
        values = {name: (request.POST.get(name) or "").strip() for name in FIELDS}
        try:
            retention_policy_set(project=project, lead=request.user, **values)
        except RetentionRefused as refused:
            error, status = str(refused), 400
        else:
            messages.success(request, f"The retention of {project.slug} is saved; the daily run applies it.")
            return redirect("project-retention", slug=slug)
    policy = retention_policy(project=project)
    days = policy.days() if policy else {origin: None for origin in RetentionOrigin}
    rows = [(origin.value, f"{origin.value}_days", days[origin]) for origin in RetentionOrigin]
    return render(
        request,
        "selection/project_retention.html",
        {"project": project, "caps": caps, "rows": rows, "policy": policy, "error": error, "max": MAX_RETENTION_DAYS},
        status=status,
    )
