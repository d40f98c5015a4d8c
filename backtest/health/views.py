"""The project page's "Read health now" button: a lead or a reviewer queues a reading."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from selection.models import Project

from . import services as health


@login_required
@require_POST
def health_check_request(request, slug: str):
    project = get_object_or_404(Project, slug=slug)
    health.health_request(project=project, user=request.user)  # AccessDenied: 403
    messages.success(request, "A health reading is queued: it appears here when a worker has taken it.")
    return redirect(reverse("project-detail", args=[slug]) + "#health")
