"""The review card: a passing backtest cannot hide a task that got worse, and approving it asks
the reviewer to acknowledge each such task; a replayed trace links back to its backtest."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from backtest import errors as backtest_errors
from backtest import judging, services
from backtest.models import Approval
from backtest.replay import dispatch
from backtest.replay import services as replays
from backtest.review import services as review_services

from .conftest import proposal

pytestmark = pytest.mark.django_db


def _finished(uid: str):
    backtest = services.backtest_enqueue(proposal=proposal(uid), requested_by=None)
    for task_id in backtest.task_ids:
        for side in dispatch.replay_sides(backtest):
            replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side=side)
    return backtest, judging.backtest_finish(backtest_id=backtest.pk)


def _regressed(html: str) -> list[str]:
    card = html[html.index('id="regressions"') :]
    return re.findall(r'<li data-task="([^"]+)"', card[: card.index("</fieldset>")])


def test_the_proposal_page_lists_every_task_that_got_worse_with_its_trace_diff(client, sift_users):
    backtest, decision = _finished("looser-stop-rule")
    assert decision.passed
    # what the replays say: tasks whose precision (or any quality metric) fell
    fell = [
        row["task"]
        for row in decision.per_task_deltas
        if any(row["delta"].get(m, 0) < -1e-9 for m in ("must_include_recall", "precision"))
        or any(row["delta"].get(m, 0) > 1e-9 for m in ("leakage", "harmful_admission"))
    ]
    assert fell, "the fixture proposal should make at least one task worse"
    client.force_login(sift_users["reviewer"])
    html = client.get(reverse("proposal-detail", args=[backtest.proposal_id])).content.decode()
    assert 'id="review-gates"' in html
    for gate in decision.gate_results:
        assert gate["reason"] in html
    regressed = _regressed(html)
    assert set(fell) <= set(regressed)
    assert "although the gates passed" in html
    assert html.count('class="task-diff"') == len(regressed)
    assert f'name="acknowledged" value="{regressed[0]}"' in html
    # an auditor sees the same card, without the checkboxes
    client.force_login(sift_users["auditor"])
    html = client.get(reverse("proposal-detail", args=[backtest.proposal_id])).content.decode()
    assert _regressed(html) == regressed and 'name="acknowledged"' not in html


def test_approving_needs_each_regressed_task_acknowledged(client, sift_users):
    backtest, _decision = _finished("looser-stop-rule")
    client.force_login(sift_users["reviewer"])
    url = reverse("proposal-detail", args=[backtest.proposal_id])
    regressed = _regressed(client.get(url).content.decode())
    review = reverse("proposal-review", args=[backtest.proposal_id])
    post = {"backtest": backtest.pk, "verdict": "approve", "comment": ""}

    response = client.post(review, {**post, "acknowledged": regressed[:-1]})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Acknowledge each task that got worse before approving: " + regressed[-1] in html
    assert not Approval.objects.filter(backtest=backtest).exists()
    # the boxes already ticked stay ticked
    assert f'value="{regressed[0]}" id="ack-1" checked' in html or len(regressed) == 1

    response = client.post(review, {**post, "acknowledged": regressed})
    assert response.status_code == 302
    assert Approval.objects.get(backtest=backtest).verdict == "approve"


def test_rejecting_needs_no_acknowledgement(client, sift_users):
    backtest, _decision = _finished("looser-stop-rule")
    client.force_login(sift_users["reviewer"])
    response = client.post(
        reverse("proposal-review", args=[backtest.proposal_id]),
        {"backtest": backtest.pk, "verdict": "reject", "comment": "precision fell on two tasks"},
    )
    assert response.status_code == 302
    assert Approval.objects.get(backtest=backtest).verdict == "reject"


def test_a_replayed_trace_links_back_to_its_backtest(client, sift_users):
    backtest, _decision = _finished("looser-stop-rule")
    trace_id = backtest.replays.order_by("pk").values_list("trace_id", flat=True).first()
    client.force_login(sift_users["auditor"])
    html = client.get(reverse("trace-detail", args=[trace_id])).content.decode()
    origin = html[html.index('id="trace-origin"') :]
    assert f'href="{reverse("backtest-detail", args=[backtest.pk])}"' in origin[: origin.index("</p>")]


def test_the_service_refuses_an_approval_missing_an_acknowledgement(sift_users):
    # the one path every interface takes: a command or the API cannot approve past a regression
    from backtest.review import card as review_card

    backtest, decision = _finished("looser-stop-rule")
    assert decision.passed
    regressed = [r.task for r in review_card.regressed_tasks(backtest=backtest)]
    assert regressed
    with pytest.raises(backtest_errors.RegressionsUnacknowledged) as refused:
        review_services.backtest_review(
            backtest=backtest, reviewer=sift_users["reviewer"], verdict="approve", acknowledged=regressed[1:]
        )
    assert refused.value.tasks == regressed[:1]
    assert regressed[0] in str(refused.value)
    assert not Approval.objects.filter(backtest=backtest).exists()
    # a task that did not get worse acknowledges nothing
    with pytest.raises(backtest_errors.RegressionsUnacknowledged):
        review_services.backtest_review(
            backtest=backtest,
            reviewer=sift_users["reviewer"],
            verdict="approve",
            acknowledged=["not-a-task", *regressed[1:]],
        )
    approval = review_services.backtest_review(
        backtest=backtest, reviewer=sift_users["reviewer"], verdict="approve", acknowledged=regressed
    )
    assert approval.verdict == "approve"
    from authority.models import AuditEntry

    entry = AuditEntry.objects.filter(action="backtest.approved").latest("pk")
    assert entry.payload["acknowledged"] == regressed


def test_the_api_lists_the_regressed_tasks_and_refuses_an_approval_missing_one(client, sift_users):
    from backtest.review import card as review_card
    from governance.tokens import services as tokens

    backtest, _decision = _finished("looser-stop-rule")
    secret = tokens.token_create(
        user=sift_users["reviewer"], name="test", project=backtest.proposal.project, role="reviewer", days=7
    ).secret
    headers = {"Authorization": f"Bearer {secret}"}
    url = f"/api/v1/backtests/{backtest.pk}"
    doc = client.get(url, headers=headers).json()
    regressed = [r.task for r in review_card.regressed_tasks(backtest=backtest)]
    assert [r["task"] for r in doc["regressed_tasks"]] == regressed
    assert all(r["worse"] and r["diff_url"] for r in doc["regressed_tasks"])

    response = client.post(
        f"{url}/reviews",
        {"verdict": "approve", "comment": "", "acknowledged": regressed[:-1]},
        content_type="application/json",
        headers=headers,
    )
    assert response.status_code == 422, response.content
    problem = response.json()
    assert regressed[-1] in problem["detail"]
    assert problem["errors"][0]["location"] == ["body", "acknowledged"]
    assert regressed[-1] in problem["errors"][0]["detail"]
    assert not Approval.objects.filter(backtest=backtest).exists()

    response = client.post(
        f"{url}/reviews",
        {"verdict": "approve", "comment": "", "acknowledged": regressed},
        content_type="application/json",
        headers=headers,
    )
    assert response.status_code == 201, response.content
    assert response.json()["approval"]["verdict"] == "approve"
