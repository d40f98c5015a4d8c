"""The proposal page tells the truth: the review form offers only what the state allows, with two
plainly labelled actions, and keeps what was ticked after a refusal; dead proposals leave the
conflict lists; "what it waits for" always says something; the live region carries the badge
and the next step."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from backtest.models import Approval
from backtest.review import card
from backtest.review import services as review_services
from governance.proposals import selectors, services

from .conftest import proposal
from .test_review_card import _finished, _regressed

pytestmark = pytest.mark.django_db


def _form(html: str) -> str:
    start = html.index('id="proposal-review-form"')
    return html[start : html.index("</form>", start)]


def test_a_failed_backtest_offers_reject_only_and_a_passed_one_both_actions(client, sift_users):
    client.force_login(sift_users["reviewer"])
    failed, decision = _finished("report-prose-in-design-review")
    assert not decision.passed
    form = _form(client.get(reverse("proposal-detail", args=[failed.proposal_id])).content.decode())
    assert 'value="approve"' not in form and "Record verdict" not in form and 'type="radio"' not in form
    assert f"Reject backtest #{failed.pk}</button>" in form and "it can be rejected, not approved" in form
    passed, _ = _finished("looser-stop-rule")
    form = _form(client.get(reverse("proposal-detail", args=[passed.proposal_id])).content.decode())
    assert f"Approve backtest #{passed.pk}</button>" in form and f"Reject backtest #{passed.pk}</button>" in form
    assert re.search(r'<button type="submit" name="verdict" value="approve"', form)


def test_the_ticks_survive_a_rejection_refused_for_want_of_a_reason(client, sift_users):
    backtest, _ = _finished("looser-stop-rule")
    client.force_login(sift_users["reviewer"])
    url = reverse("proposal-detail", args=[backtest.proposal_id])
    regressed = _regressed(client.get(url).content.decode())
    response = client.post(
        reverse("proposal-review", args=[backtest.proposal_id]),
        {"backtest": backtest.pk, "verdict": "reject", "comment": "", "acknowledged": regressed},
    )
    html = response.content.decode()
    assert response.status_code == 400 and "a rejection needs a comment" in html
    assert not Approval.objects.filter(backtest=backtest).exists()
    for i, task in enumerate(regressed, start=1):
        assert f'value="{task}" id="ack-{i}" checked' in html
    # and through a form that does not validate (no verdict at all)
    response = client.post(
        reverse("proposal-review", args=[backtest.proposal_id]),
        {"backtest": backtest.pk, "comment": "x", "acknowledged": regressed[:1]},
    )
    assert response.status_code == 400 and f'value="{regressed[0]}" id="ack-1" checked' in response.content.decode()


def test_failed_rejected_and_closed_proposals_leave_the_conflict_lists(client, sift, sift_users):
    other = proposal("all-three")  # open: it also sets the stop rule
    looser = proposal("looser-stop-rule")
    assert other.pk in [c.proposal.pk for c in selectors.open_conflicts([looser], among=[looser, other])[looser.pk]]
    backtest, _ = _finished("all-three")
    review_services.backtest_review(
        backtest=backtest, reviewer=sift_users["reviewer"], verdict="reject", comment="no", acknowledged=()
    )
    other.refresh_from_db()
    assert other.state == "rejected"
    client.force_login(sift_users["lead"])
    html = client.get(reverse("proposal-detail", args=[looser.pk])).content.decode()
    assert f'data-proposal="{other.pk}"' not in html
    listed = client.get(reverse("proposal-list", args=["sift"])).content.decode()
    assert f"#{other.pk} {other.title}" not in listed.split(f'data-proposal="{looser.pk}"', 1)[1].split("</tr>", 1)[0]
    services.proposal_close(proposal=proposal("protocol-in-config-repair"), lead=sift_users["lead"], reason="done")
    failed, _ = _finished("report-prose-in-design-review")
    dead = {p.pk for p in (other, failed.proposal, proposal("protocol-in-config-repair"))}
    every = list(selectors.proposal_rows(project=sift))
    conflicts = selectors.open_conflicts(every)
    assert not dead & set(conflicts)
    assert not dead & {c.proposal.pk for found in conflicts.values() for c in found}


def test_what_it_waits_for_never_ends_with_nothing(client, sift_users):
    backtest, _ = _finished("looser-stop-rule")
    worse = [r.task for r in card.regressed_tasks(backtest=backtest)]
    review_services.backtest_review(
        backtest=backtest, reviewer=sift_users["reviewer"], verdict="approve", comment="", acknowledged=worse
    )
    client.force_login(sift_users["auditor"])  # nothing blocks it, but an auditor cannot promote
    html = client.get(reverse("proposal-detail", args=[backtest.proposal_id])).content.decode()
    waits = re.search(r'id="waits-for">([^<]*)<', html).group(1)
    assert waits.strip(" .") and "a lead of sift can promote" in waits


def test_the_live_region_carries_the_badge_and_the_next_step(
    client, sift, sift_users, django_capture_on_commit_callbacks
):
    from backtest.services import backtest_enqueue

    backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=None)  # queued: the page is live
    client.force_login(sift_users["auditor"])
    html = client.get(reverse("proposal-detail", args=[proposal("looser-stop-rule").pk])).content.decode()
    live = html[html.index('id="proposal-live"') :][:400]
    assert 'hx-select-oob="#state,#next-step"' in live and 'hx-trigger="every 2s"' in live
