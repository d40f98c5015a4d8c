"""The backtest page and its live fragment: progress counts while running, gates and roles after."""

from __future__ import annotations

import pytest
from django.urls import reverse

from backtest import judging, services
from backtest.models import Approval
from backtest.replay import dispatch
from backtest.replay import services as replays

from .conftest import proposal

pytestmark = pytest.mark.django_db


@pytest.fixture
def half_done(sift):
    """A backtest of looser-stop-rule with 3 of its 40 replays written (10 tasks under the baseline,
    the candidate and each of its two parts alone), then a way to finish it."""
    backtest = services.backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=None)
    pairs = [(t, s) for t in backtest.task_ids for s in dispatch.replay_sides(backtest)]
    for task_id, side in pairs[:3]:
        replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side=side)

    def finish():
        for task_id, side in pairs[3:]:
            replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side=side)
        return judging.backtest_finish(backtest_id=backtest.pk)

    return backtest, finish


def test_the_fragment_reports_progress_and_keeps_polling_while_running(client, sift_users, half_done):
    backtest, _finish = half_done
    client.force_login(sift_users["auditor"])
    response = client.get(reverse("backtest-live", args=[backtest.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-done="3" data-total="40"' in html
    assert "3 of 40 replays" in html and 'value="3" max="40"' in html
    assert 'hx-trigger="every 1s"' in html and reverse("backtest-live", args=[backtest.pk]) in html
    assert 'id="decision"' not in html
    page = client.get(reverse("backtest-detail", args=[backtest.pk])).content.decode()
    assert "3 of 40 replays" in page and "<html" in page and "<html" not in html


def test_a_finished_backtest_shows_each_gate_with_its_reason_and_stops_polling(client, sift_users, half_done):
    backtest, finish = half_done
    decision = finish()
    client.force_login(sift_users["reviewer"])
    html = client.get(reverse("backtest-live", args=[backtest.pk])).content.decode()
    assert "hx-trigger" not in html
    assert "40 of 40 replays" in html
    for gate in decision.gate_results:
        assert gate["reason"] in html
    assert html.count('class="gate ') == 4
    # a gate whose metric did not move says so in words
    flat = [g for g in decision.gate_results if g.get("delta") is not None and abs(g["delta"]) <= 1e-9]
    assert flat and html.count(">no change</td>") == len(flat)
    assert 'id="delta-chart"' in html and 'id="delta-chart-data"' in html
    assert html.count("<tr data-task=") == 10
    assert reverse("proposal-review", args=[backtest.proposal_id]) in html  # a reviewer gets the form
    page = client.get(reverse("backtest-detail", args=[backtest.pk])).content.decode()
    assert "vendor/plotly/plotly-basic-3.7.0.min.js" in page


def test_the_proposal_page_links_its_backtest(client, sift_users, half_done):
    backtest, _finish = half_done
    client.force_login(sift_users["lead"])
    html = client.get(reverse("proposal-detail", args=[backtest.proposal_id])).content.decode()
    assert f'href="{reverse("backtest-detail", args=[backtest.pk])}"' in html


def test_an_auditor_reads_the_backtest_but_cannot_review_it(client, sift_users, half_done):
    backtest, finish = half_done
    decision = finish()
    client.force_login(sift_users["auditor"])
    html = client.get(reverse("backtest-detail", args=[backtest.pk])).content.decode()
    assert "Only a reviewer of sift can approve or reject." in html
    assert 'id="review-form"' not in html
    verdict = "approve" if decision.passed else "reject"
    response = client.post(
        reverse("proposal-review", args=[backtest.proposal_id]),
        {"backtest": backtest.pk, "verdict": verdict, "comment": "looks fine"},
    )
    assert response.status_code == 403
    assert not Approval.objects.exists()


def test_someone_without_a_role_in_the_project_gets_403(client, sift_users, half_done):
    backtest, _finish = half_done
    client.force_login(sift_users["outsider"])
    assert client.get(reverse("backtest-detail", args=[backtest.pk])).status_code == 403
    assert client.get(reverse("backtest-live", args=[backtest.pk])).status_code == 403
