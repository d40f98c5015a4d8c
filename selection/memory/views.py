"""The unit page: one memory unit as stored (its validity, evidence class, open loop and lineage:
what it supersedes and what supersedes it, echoes, refutations, support), the traces it appears
in, and a lead's erasure of its text.

Views parse, call one selector or service, render; access is checked in the service (and reading
the unit needs any role in its project, like a trace).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from authority import access
from selection.memory.erasure import ERASED_KEY, MAX_REASON, ErasureRefused, unit_erase
from selection.models import LinkKind, MemoryUnit, TraceCandidate, UnitLink

CONFIRM_WORD = "erase"

# each link kind read from the unit (outgoing) and towards it (incoming), in words
LINEAGE = (
    (LinkKind.SUPERSEDES, "supersedes", "superseded by"),
    (LinkKind.ECHO_OF, "restates (echo of)", "restated by (echoes)"),
    (LinkKind.REFUTES, "refutes", "refuted by"),
    (LinkKind.SUPPORTS, "supports", "supported by"),
)


def _lineage(unit: MemoryUnit) -> list[tuple[str, str, list[MemoryUnit]]]:
    """(key, words, units) for every link of the unit, outgoing then incoming, in link order."""
    links = UnitLink.objects.filter(Q(source=unit) | Q(target=unit)).select_related("source", "target")
    rows = []
    for kind, out_words, in_words in LINEAGE:
        outgoing = [link.target for link in links if link.source_id == unit.pk and link.kind == kind]
        incoming = [link.source for link in links if link.target_id == unit.pk and link.kind == kind]
        if outgoing:
            rows.append((f"{kind}", out_words, outgoing))
        if incoming:
            rows.append((f"{kind}-in", in_words, incoming))
    return rows


def _unit(name: str, uid: str) -> MemoryUnit:
    return get_object_or_404(MemoryUnit.objects.select_related("project", "corpus"), corpus__name=name, uid=uid)


def _page(request, unit: MemoryUnit, *, error: str = "", reason: str = "", status: int = 200):
    caps = access.access_read(request.user, unit.project)
    traces = (
        TraceCandidate.objects.filter(unit_uid=unit.uid, trace__project__corpus_id=unit.corpus_id)
        .values("trace_id")
        .distinct()
        .count()
    )
    return render(
        request,
        "selection/unit_detail.html",
        {
            "unit": unit,
            "caps": caps,
            "lineage": _lineage(unit),
            "now": timezone.now(),
            "erased": unit.extras.get(ERASED_KEY),
            "traces": traces,
            "history_url": f"{reverse('trace-list')}?unit={unit.uid}",
            "error": error,
            "reason": reason,
            "max_reason": MAX_REASON,
            "confirm_word": CONFIRM_WORD,
        },
        status=status,
    )


@login_required
def unit_detail(request, name: str, uid: str):
    return _page(request, _unit(name, uid))


@login_required
@require_POST
def unit_erase_view(request, name: str, uid: str):
    unit = _unit(name, uid)
    access.access_erase(request.user, unit.project)  # a 403 before the form is even read
    reason = request.POST.get("reason", "")
    if (request.POST.get("confirm") or "").strip().lower() != CONFIRM_WORD:
        error = f"type the word {CONFIRM_WORD} to confirm the erasure"
        return _page(request, unit, error=error, reason=reason, status=400)
    try:
        erasure = unit_erase(unit=unit, lead=request.user, reason=reason)
    except ErasureRefused as error:
        return _page(request, unit, error=str(error), reason=reason, status=400)
    messages.success(request, f"{erasure.unit} erased from the unit and {len(erasure.traces)} trace(s).")
    return redirect("unit-detail", name=name, uid=uid)
