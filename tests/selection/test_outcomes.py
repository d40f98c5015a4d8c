"""An outcome report is written with its audit row in one transaction: both or neither."""

from __future__ import annotations

import pytest

from authority.models import AuditEntry
from selection.models import TraceOutcome
from selection.serving.serve import select_for_user
from selection.traces import outcomes
from tests.api.conftest import people  # noqa: F401 - fixtures shared with the API tests
from tests.backtest.conftest import (  # noqa: F401 - fixtures shared with the backtest tests
    celery_worker_process,
    context_lab,
    sift,
    sift_users,
)


@pytest.fixture
def trace(people):  # noqa: F811
    return select_for_user(user=people["lead"], project_slug="sift", query="tokenizer unicode IndexError").trace


def test_an_outcome_report_writes_its_audit_row(trace, people):  # noqa: F811
    outcome = outcomes.outcome_report(
        user=people["reviewer"], trace_id=trace.pk, verdict="failed", note="wrong answer", missing_units=["u1"]
    )
    entry = AuditEntry.objects.get(action="trace.outcome_reported")
    assert (entry.actor, entry.project, entry.object_id) == (people["reviewer"], trace.project, str(outcome.pk))
    assert entry.payload == {"trace": trace.pk, "verdict": "failed", "missing_units": ["u1"]}


def test_a_failed_audit_write_leaves_no_outcome(trace, people, monkeypatch):  # noqa: F811
    def broken(**kwargs):
        raise RuntimeError("the audit log is unavailable")

    monkeypatch.setattr(outcomes, "audit_record", broken)
    with pytest.raises(RuntimeError, match="audit log is unavailable"):
        outcomes.outcome_report(user=people["reviewer"], trace_id=trace.pk, verdict="failed")
    assert not TraceOutcome.objects.filter(trace=trace).exists()
    assert not AuditEntry.objects.filter(action="trace.outcome_reported").exists()
