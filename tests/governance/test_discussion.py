"""Review discussion: comments on a proposal and on one task row of its backtest,
append-only and audited; the proposal page shows the thread, the decisions and who took them, in
time order; a rejection needs its reason."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from authority.access import AccessDenied
from authority.models import AuditEntry
from backtest import errors as backtest_errors
from backtest.models import ReviewComment
from backtest.review import services as review_services
from tests.api.conftest import ApiClient, assert_problem

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(project):
    from selection.models import Task

    return Task.objects.create(
        corpus=project.corpus, project=project, uid="review-the-release", query="q", budget_tokens=100
    )


@pytest.fixture
def reviewed(submit, task):
    """A proposal with a finished backtest over one task, as the backtest app leaves it."""
    from backtest.models import Backtest, BacktestDecision
    from backtest.review.selectors import current_engine_version, current_task_set_digest

    proposal = submit()
    backtest = Backtest.objects.create(
        proposal=proposal, baseline_version=proposal.base_version, candidate_version=proposal.frame_version,
        task_ids=[task.pk], task_set_digest=current_task_set_digest(project=proposal.project),
        engine_version=current_engine_version(), gates={}, status="finished",
    )
    BacktestDecision.objects.create(
        backtest=backtest, passed=True, primary_metric="must_include_recall", baseline_means={},
        candidate_means={}, gate_results=[], per_task_deltas=[],
    )
    return proposal, backtest


def test_comments_on_the_proposal_and_on_a_task_row_are_audited_and_append_only(reviewed, users, task):
    proposal, backtest = reviewed
    first = review_services.review_comment(proposal=proposal, author=users["reviewer"], body="Why rules first?")
    on_row = review_services.review_comment(
        proposal=proposal, author=users["lead"], body="This task lost its decision unit.",
        backtest=backtest, task_id=task.pk,
    )
    assert (first.task_id, on_row.task_id, on_row.backtest_id) == (None, task.pk, backtest.pk)
    entries = AuditEntry.objects.filter(action="proposal.commented").order_by("id")
    assert [e.actor.username for e in entries] == ["reviewer", "lead"]
    assert entries[1].payload["task"] == "review-the-release" and "on task review-the-release" in entries[1].summary
    with pytest.raises(IntegrityError), transaction.atomic():
        ReviewComment.objects.filter(pk=first.pk).update(body="edited")
    with pytest.raises(IntegrityError), transaction.atomic():
        ReviewComment.objects.filter(pk=first.pk).delete()


def test_a_comment_is_refused_with_why_and_nothing_written(reviewed, users, submit):
    proposal, backtest = reviewed
    other_backtest_owner = submit(patch={"class_pull": 9})
    with pytest.raises(AccessDenied):
        review_services.review_comment(proposal=proposal, author=users["auditor"], body="hm")
    with pytest.raises(backtest_errors.CommentRefused, match="needs some text"):
        review_services.review_comment(proposal=proposal, author=users["lead"], body="   ")
    with pytest.raises(backtest_errors.CommentRefused, match="not in backtest"):
        review_services.review_comment(
            proposal=proposal, author=users["lead"], body="x", backtest=backtest, task_id=999_999
        )
    with pytest.raises(backtest_errors.CommentRefused, match="is not a backtest of"):
        review_services.review_comment(
            proposal=other_backtest_owner, author=users["lead"], body="x", backtest=backtest
        )
    assert not ReviewComment.objects.exists()


def test_the_proposal_page_shows_thread_and_decisions_in_time_order(client, reviewed, users, task):
    proposal, backtest = reviewed
    client.force_login(users["reviewer"])
    page = reverse("proposal-detail", args=[proposal.pk])
    client.post(
        reverse("proposal-comment", args=[proposal.pk]),
        {"body": "Recall fell on this one.", "backtest": backtest.pk, "task": task.pk},
    )
    # a rejection without its reason is refused on the page, nothing recorded
    response = client.post(
        reverse("proposal-review", args=[proposal.pk]), {"backtest": backtest.pk, "verdict": "reject", "comment": ""}
    )
    assert response.status_code == 400 and "a rejection needs a comment saying why" in response.content.decode()
    client.post(
        reverse("proposal-review", args=[proposal.pk]),
        {"backtest": backtest.pk, "verdict": "reject", "comment": "split the precision change out"},
    )
    client.force_login(users["lead"])
    client.post(reverse("proposal-comment", args=[proposal.pk]), {"body": "Splitting it now."})

    html = client.get(page).content.decode()
    thread = html[html.index('id="timeline"'):]
    order = [
        thread.index(text)
        for text in (
            "proposed v1 → v2",
            "commented on task review-the-release of backtest",
            "Recall fell on this one.",
            "rejected backtest",
            "split the precision change out",
            "Splitting it now.",
        )
    ]
    assert order == sorted(order)
    assert '<strong class="who">reviewer</strong> rejected' in thread
    # the task's trace diff is one click away from the comment: here the row (this backtest
    # wrote no replay, so there is no diff to link)
    assert reverse("backtest-detail", args=[backtest.pk]) + f"#task-{task.pk}" in thread

    # an auditor reads the thread but has no comment box
    client.force_login(users["auditor"])
    html = client.get(page).content.decode()
    assert "Splitting it now." in html and 'id="comment-form"' not in html
    assert client.post(reverse("proposal-comment", args=[proposal.pk]), {"body": "x"}).status_code == 403


def test_a_task_row_comment_returns_to_its_row_and_an_empty_one_is_refused(client, reviewed, users, task):
    # (the row's comment box on a real backtest page is walked in tests/backtest/test_stale_browser.py)
    proposal, backtest = reviewed
    client.force_login(users["reviewer"])
    url = reverse("proposal-comment", args=[proposal.pk])
    response = client.post(url, {"body": "Look at this row", "backtest": backtest.pk, "task": task.pk})
    assert response["Location"] == reverse("backtest-detail", args=[backtest.pk]) + f"#task-{task.pk}"
    refused = client.post(url, {"body": "", "backtest": backtest.pk, "task": task.pk}, follow=True)
    assert "Not posted" in refused.content.decode() and ReviewComment.objects.count() == 1


def test_the_api_comments_and_reads_the_thread(client, reviewed, users, project, task):
    from governance.tokens import services as tokens

    proposal, backtest = reviewed
    reviewer = ApiClient(
        client, tokens.token_create(user=users["reviewer"], name="r", project=project, role="reviewer", days=30).secret
    )
    response = reviewer.post(
        f"/proposals/{proposal.pk}/comments", {"body": "on the row", "backtest": backtest.pk, "task": task.uid}
    )
    assert response.status_code == 201, response.content
    last = response.json()[-1]
    assert (last["kind"], last["who"], last["task"], last["body"]) == ("comment", "reviewer", task.uid, "on the row")
    assert_problem(reviewer.post(f"/proposals/{proposal.pk}/comments", {"body": " "}), 422)
    assert_problem(
        reviewer.post(f"/proposals/{proposal.pk}/comments", {"body": "x", "backtest": backtest.pk, "task": "nope"}),
        404,
    )
    thread = reviewer.get(f"/proposals/{proposal.pk}/timeline").json()
    assert [e["kind"] for e in thread] == ["submitted", "backtest", "comment"]
