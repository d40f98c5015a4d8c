"""Outcome reports: how a bundle served the work it was selected for, written with its audit row."""

from __future__ import annotations

from django.db import transaction
from django.shortcuts import get_object_or_404

from authority import access
from authority.audit import audit_record
from selection.engine.errors import SelectionError
from selection.models import OutcomeVerdict, Trace, TraceOutcome


def outcome_report(*, user, trace_id: int, verdict: str, note: str = "", missing_units=()) -> TraceOutcome:
    """Record how a bundle served the work it was selected for (an agent's feedback)."""
    trace = get_object_or_404(Trace.objects.select_related("project"), pk=trace_id)
    access.access_report_outcome(user, trace.project)
    if verdict not in OutcomeVerdict.values:
        raise SelectionError(f'verdict "{verdict}" is not one of: {", ".join(OutcomeVerdict.values)}')
    with transaction.atomic():
        outcome = TraceOutcome.objects.create(
            trace=trace, reporter=user, verdict=verdict, note=note or "", missing_units=[str(u) for u in missing_units]
        )
        audit_record(
            actor=user,
            project=trace.project,
            action="trace.outcome_reported",
            obj=outcome,
            summary=f"trace {trace.pk}: {verdict}",
            payload={"trace": trace.pk, "verdict": verdict, "missing_units": outcome.missing_units},
        )
    return outcome
