"""Ledgers from traces: the queue of unlabelled traces and the page that labels one into a task.

Views parse, call selection.traces.labelling (which checks the role itself), render.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from authority import access
from selection.models import LedgerLabel, MemoryUnit, Project, TaskLabelling, TraceCandidate
from selection.traces import labelling, redaction, selectors


@login_required
def trace_queue(request):
    readable = list(access.readable_projects(request.user, Project.objects.all()).order_by("slug"))
    project = next((p for p in readable if p.slug == request.GET.get("project")), None)
    work_type = (request.GET.get("work_type") or "").strip()[:100]
    return render(
        request,
        "selection/trace_queue.html",
        {
            "traces": labelling.unlabelled_traces(user=request.user, project=project, work_type=work_type),
            "projects": readable,
            "project": project,
            "work_type": work_type,
        },
    )


@login_required
def trace_label(request, pk: int):
    trace, caps = selectors.readable_trace(user=request.user, pk=pk)
    done = TaskLabelling.objects.filter(trace=trace).select_related("task", "labelled_by", "task_set_version").first()
    labels: dict[str, str] = {}
    error = ""
    status = 200
    if request.method == "POST" and done is None:
        labels = {k.removeprefix("label:"): v for k, v in request.POST.items() if k.startswith("label:") and v}
        try:
            made = labelling.trace_label(trace=trace, user=request.user, labels=labels, uid=request.POST.get("uid", ""))
        except labelling.LabellingRefused as refused:
            error, status = str(refused), 400
        else:
            messages.success(
                request,
                f"Task {made.task.uid} joined {trace.project.slug}'s task set, now v{made.version.number}.",
            )
            return redirect("trace-label", pk=pk)
    candidates = list(TraceCandidate.objects.filter(trace=trace).order_by("position"))
    units = _unit_texts(trace, [c.unit_uid for c in candidates], user=request.user)
    return render(
        request,
        "selection/trace_label.html",
        {
            "trace": trace,
            "caps": caps,
            "done": done,
            "rows": [(c, labels.get(c.unit_uid, ""), units.get(c.unit_uid, ("", ""))) for c in candidates],
            "choices": LedgerLabel.values,
            "error": error,
            "uid": request.POST.get("uid", "") if request.method == "POST" else "",
        },
        status=status,
    )


def _unit_texts(trace, uids: list[str], *, user) -> dict[str, tuple[str, str]]:
    """unit id -> (title, text) as the corpus holds them now (an erased unit: its mark), for a
    labeller to judge each unit in place; a unit of a project `user` holds no role in is redacted."""
    readable = redaction.readable_slugs(user)
    rows = MemoryUnit.objects.filter(corpus_id=trace.project.corpus_id, uid__in=uids).values_list(
        "uid", "project__slug", "title", "text"
    )
    return {
        uid: (title, text) if slug in readable else ("", redaction.REDACTED.format(project=slug))
        for uid, slug, title, text in rows
    }
