"""The webhooks page of a project: its endpoints, their recent deliveries, a new endpoint (a lead).

A secret is rendered once, in the answer to the POST that made it (adding an endpoint or rotating
its secret); the page shows it masked otherwise.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_POST

from authority import access
from authority.errors import InputRefused

from .. import selectors
from ..models import WebhookEndpoint
from . import services as webhooks


def _page(request, project, caps, *, error: str = "", issued=None, status: int = 200):
    endpoints, deliveries = webhooks.project_webhooks(project=project)
    return render(
        request,
        "governance/webhooks.html",
        {
            "project": project,
            "caps": caps,
            "endpoints": endpoints,
            "deliveries": deliveries,
            "event_names": webhooks.EVENT_NAMES,
            "error": error,
            "issued": issued,
        },
        status=status,
    )


@login_required
def project_webhooks(request, slug: str):
    """A lead's page: the project's signed webhooks, adding one, and the log of every delivery."""
    project = selectors.project_for_slug(slug=slug)
    caps = access.access_webhooks(request.user, project)
    if request.method == "POST":
        try:
            issued = webhooks.webhook_create(
                project=project,
                lead=request.user,
                url=request.POST.get("url", ""),
                events=request.POST.getlist("events"),
            )
        except InputRefused as refused:
            return _page(request, project, caps, error=str(refused), status=400)
        return _page(request, project, caps, issued=issued)
    return _page(request, project, caps)


@login_required
@require_POST
def webhook_secret_rotate(request, slug: str, pk: int):
    """The rotate button: a fresh secret, shown once on the page it answers with."""
    project = selectors.project_for_slug(slug=slug)
    caps = access.access_webhooks(request.user, project)
    try:
        issued = webhooks.webhook_secret_rotate(project=project, lead=request.user, endpoint_id=pk)
    except WebhookEndpoint.DoesNotExist as missing:
        return _page(request, project, caps, error=str(missing), status=400)
    return _page(request, project, caps, issued=issued)
