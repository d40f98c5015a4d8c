"""The Memory pages of a project: its recent units by sequence, an "Add a unit" form, a "Supersede"
form on a unit, and the "To admit" queue where a lead or a reviewer admits or declines candidates.

Views parse the form and call the write services (selection.memory.writes); those check access.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from authority import access
from authority.errors import GovernanceError
from selection.corpus.frames import memory_admission
from selection.memory.writes import admission, services
from selection.memory.writes.conflicts import conflicts_of
from selection.memory.writes.validation import known_classes
from selection.models import MemoryUnit, Project, UnitStatus

RECENT = 50
FIELDS = ("class", "title", "text", "subject", "facet", "valid_from")
OPEN_LOOP_KINDS = ("todo", "question", "expectation")


def _project(slug: str) -> Project:
    return get_object_or_404(Project.objects.select_related("corpus"), slug=slug)


def _fields(post) -> dict:
    """The unit the form describes: blank fields left out."""
    fields = {name: post.get(name, "").strip() for name in FIELDS}
    fields = {name: value for name, value in fields.items() if value}
    if post.get("text", "").strip():
        fields["text"] = post["text"]
    if post.get("open_loop") in OPEN_LOOP_KINDS:
        fields["open_loop"] = {"status": "open", "kind": post["open_loop"]}
    return fields


def _context(project: Project, caps, **extra) -> dict:
    snapshot = admission.project_snapshot(project)
    return {
        "project": project,
        "caps": caps,
        "admission": memory_admission(snapshot),
        "classes": sorted(known_classes(project, snapshot)),
        "loop_kinds": OPEN_LOOP_KINDS,
        "candidates": admission.candidates_of(project).count(),
        **extra,
    }


@login_required
@require_http_methods(["GET", "POST"])
def project_memory(request, slug: str):
    """The project's units, latest change first, and the "Add a unit" form (a lead)."""
    project = _project(slug)
    caps = access.access_read(request.user, project)
    error, status, form = "", 200, {}
    if request.method == "POST":
        form = _fields(request.POST)
        try:
            write = services.unit_create(actor=request.user, project=project, fields=form, via="page")
        except GovernanceError as refused:
            error, status = str(refused), 400
        else:
            messages.success(request, f"{write.unit} written ({write.document['status']}, sequence "
                             f"{write.document['sequence']}).")  # fmt: skip
            return redirect("project-memory", slug=slug)
    units = MemoryUnit.objects.filter(project=project).order_by("-sequence", "uid")[:RECENT]
    context = _context(project, caps, units=units, error=error, form=form)
    return render(request, "memory/project_memory.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def memory_supersede(request, slug: str, uid: str):
    """The "Supersede" form on a unit: a new unit replacing it (a lead)."""
    project = _project(slug)
    caps = access.access_read(request.user, project)
    unit = get_object_or_404(MemoryUnit, project=project, uid=uid, status=UnitStatus.ACTIVE)
    error, status = "", 200
    form = {"class": unit.evidence_class, "title": unit.title, "text": unit.text, "subject": unit.subject,
            "facet": unit.facet}  # fmt: skip
    if request.method == "POST":
        form = _fields(request.POST)
        try:
            write = services.unit_supersede(actor=request.user, project=project, targets=[uid], fields=form, via="page")
        except GovernanceError as refused:
            error, status = str(refused), 400
        else:
            messages.success(request, f"{write.unit} supersedes {uid} ({write.document['status']}).")
            return redirect("project-memory", slug=slug)
    context = _context(project, caps, unit=unit, error=error, form=form)
    return render(request, "memory/memory_supersede.html", context, status=status)


@login_required
def memory_queue(request, slug: str):
    """The "To admit" queue: each candidate, who wrote it, and the units it collides with."""
    project = _project(slug)
    caps = access.access_read(request.user, project)
    rows = [
        (unit, admission.candidate_writer(unit), conflicts_of(unit))
        for unit in admission.candidates_of(project).select_related("project")
    ]
    return render(request, "memory/memory_queue.html", _context(project, caps, rows=rows))


@login_required
@require_POST
def memory_decide(request, slug: str, uid: str):
    """Admit or decline one candidate, with a reason (a lead or a reviewer)."""
    project = _project(slug)
    decide = admission.unit_admit if request.POST.get("decision") == "admit" else admission.unit_decline
    try:
        write = decide(actor=request.user, project=project, uid=uid, reason=request.POST.get("reason", ""), via="page")
    except GovernanceError as refused:
        messages.error(request, f"{uid}: {refused}")
    else:
        messages.success(request, f"{uid} {write.document['status']}: {write.document['reason']}")
    return redirect("memory-queue", slug=slug)
