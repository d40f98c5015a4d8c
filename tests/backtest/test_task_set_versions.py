"""Task sets are versioned: every backtest names the version of its project's task
set it replayed, and a proposal whose backtests ran on different versions says so, on its page
and in the API."""

from __future__ import annotations

import pytest
from django.urls import reverse

from authority.models import AuditEntry
from backtest import services
from backtest.models import TaskReplay
from selection.models import TaskSetVersion, TraceCandidate
from selection.traces import labelling
from tests.api.conftest import ApiClient

from .test_review_card import _finished

pytestmark = pytest.mark.django_db


def test_a_backtest_names_its_task_set_version_and_the_proposal_says_when_they_differ(client, sift_users):
    from governance.tokens import services as tokens

    first, _decision = _finished("looser-stop-rule")
    assert first.task_set_version.number == 1 and first.task_set_version.reason == "the task set as imported"
    assert AuditEntry.objects.get(action="backtest.started").payload["task_set_version"] == 1

    # a reviewer turns one replayed selection into a task: the set is v2, and the next backtest names it
    trace = TaskReplay.objects.filter(backtest=first).order_by("pk").first().trace
    unit = TraceCandidate.objects.filter(trace=trace).order_by("position").values_list("unit_uid", flat=True)[0]
    labelling.trace_label(trace=trace, user=sift_users["reviewer"], labels={unit: "MUST"}, uid="from-backtest")
    second = services.backtest_enqueue(proposal=first.proposal, requested_by=sift_users["lead"])
    assert second.task_set_version.number == 2 and len(second.task_ids) == len(first.task_ids) + 1
    assert TaskSetVersion.objects.filter(project=first.proposal.project).count() == 2

    client.force_login(sift_users["auditor"])
    page = client.get(reverse("proposal-detail", args=[first.proposal_id])).content.decode()
    assert "These backtests ran on different task sets (v1, v2)" in page
    detail = client.get(reverse("backtest-detail", args=[second.pk])).content.decode()
    assert '<dd id="task-set"><strong>v2</strong>' in detail

    api = ApiClient(
        client,
        tokens.token_create(
            user=sift_users["lead"], name="t", project=first.proposal.project, role="lead", days=30
        ).secret,
    )
    proposal = api.get(f"/proposals/{first.proposal_id}").json()
    assert proposal["task_sets_differ"] == ["v1", "v2"]
    assert [b["task_set_version"] for b in proposal["backtests"]] == ["v2", "v1"]
    backtest = api.get(f"/backtests/{second.pk}").json()
    assert (backtest["task_set_version"], backtest["task_set_version_number"]) == ("v2", 2)
