"""The webhooks page of a project: its endpoints, their recent deliveries, a new endpoint (a lead)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from authority import access
from authority.errors import InputRefused

from .. import selectors
from . import services as webhooks


@login_required
def project_webhooks(request, slug: str):
    """A lead's page: the project's signed webhooks, adding one, and the log of every delivery."""
    project = selectors.project_for_slug(slug=slug)
    caps = access.access_webhooks(request.user, project)
    error, status = "", 200
    if request.method == "POST":
        try:
            endpoint = webhooks.webhook_create(
                project=project, lead=request.user, url=request.POST.get("url", ""),
                events=request.POST.getlist("events"),
            )
        except InputRefused as refused:
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
