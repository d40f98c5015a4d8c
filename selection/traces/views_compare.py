"""Trace pages that compare: verify a trace, its counterfactuals, two traces' diff, then and now.

Views parse, call one selector or service, render. Any role in the trace's project may read every
page (access_read); the only writing action, then-and-now's replay, needs access_replay.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from authority.selectors import current_frame_version
from selection.engine.explain import trace_diff
from selection.serving import selections as services
from selection.traces import selectors
from selection.traces.memory_diff import memory_diff, memory_since
from selection.traces.views import id_param

REPLAY_SOURCE = "replay"


@login_required
@require_http_methods(["GET", "POST"])
def trace_verify(request, pk: int):
    """Recompute the digest (stored text and an engine re-run); writes nothing, so auditors may."""
    trace, _ = selectors.readable_trace(user=request.user, pk=pk)
    verification = selectors.trace_verify(trace)
    return render(request, "selection/trace_verify.html", {"trace": trace, "verification": verification})


@login_required
def trace_counterfactual(request, pk: int, unit_uid: str):
    trace, _ = selectors.readable_trace(user=request.user, pk=pk)
    explained = selectors.trace_explained(trace, user=request.user)
    record = explained.result.trace.candidate(unit_uid)
    in_ledger = unit_uid in explained.ledger
    if record is None and not in_ledger:
        raise Http404(f"{unit_uid} is neither a candidate of trace #{trace.pk} nor in its ledger")
    report = selectors.trace_counterfactual(trace, unit_uid)
    return render(
        request,
        "selection/trace_counterfactual.html",
        {
            "trace": trace,
            "unit_uid": unit_uid,
            "record": record,
            "label": explained.ledger.get(unit_uid, ""),
            "ecode": explained.ecodes.get(unit_uid, ""),
            "report": report,
            "engine_trace": explained.result.trace,
        },
    )


# --------------------------------------------------------------------------------------------
# Diff, then and now
# --------------------------------------------------------------------------------------------


def _diff_context(request, a_pk: int, b_pk: int) -> dict:
    a, _ = selectors.readable_trace(user=request.user, pk=a_pk)
    b, _ = selectors.readable_trace(user=request.user, pk=b_pk)
    (ra, _), (rb, _) = selectors.trace_read(a, user=request.user), selectors.trace_read(b, user=request.user)
    return {
        "a": a,
        "b": b,
        "diff": trace_diff(ra.trace, rb.trace),
        "memory": memory_diff(a, b, ra.trace, rb.trace),
    }


@login_required
def trace_diff_view(request):
    a, b = id_param(request.GET.get("a", "")), id_param(request.GET.get("b", ""))
    if a is None or b is None:
        raise Http404("?a= and ?b= must be trace ids")
    return render(request, "selection/trace_diff.html", _diff_context(request, a, b))


@login_required
@require_http_methods(["GET", "POST"])
def trace_now(request, pk: int):
    trace, caps = selectors.readable_trace(user=request.user, pk=pk)
    if request.method == "POST":
        replay = services.trace_replay(trace=trace, actor=request.user, source=REPLAY_SOURCE)
        return redirect(f"{reverse('trace-now', args=[trace.pk])}?replay={replay.pk}")
    replay_pk = id_param(request.GET.get("replay", ""))
    context = {
        "trace": trace,
        "caps": caps,
        "current": _current_version(trace),
        "memory_now": memory_since(trace),
    }
    if replay_pk is not None:
        context.update(_diff_context(request, trace.pk, replay_pk))
    return render(request, "selection/trace_now.html", context)


def _current_version(trace):
    return current_frame_version(project=trace.project)
