"""Proposals always have a next step: run a backtest, resubmit a stale one over the current
version, watch a running backtest in place, confirm a promotion."""

from __future__ import annotations

import pytest
from django.urls import reverse

from backtest.models import Backtest
from governance.models import Proposal

from .test_inbox import lead_promotes  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


def test_a_proposal_without_a_backtest_offers_to_run_one(client, users, submit):
    proposal = submit()
    Backtest.objects.filter(proposal=proposal).delete()  # as a fixture proposal arrives
    url = reverse("proposal-detail", args=[proposal.pk])
    client.force_login(users["auditor"])
    assert 'id="run-backtest"' not in client.get(url).content.decode()
    client.force_login(users["lead"])
    assert 'id="run-backtest"' in client.get(url).content.decode()
    # this project has no task: the refusal is said on the page, nothing is started
    response = client.post(reverse("proposal-backtest-start", args=[proposal.pk]), follow=True)
    assert "No backtest started: alpha has no task to replay" in response.content.decode()
    assert not Backtest.objects.filter(proposal=proposal).exists()


def test_an_auditor_may_not_start_a_backtest(client, users, submit):
    proposal = submit()
    client.force_login(users["auditor"])
    assert client.post(reverse("proposal-backtest-start", args=[proposal.pk])).status_code == 403


def test_a_stale_proposal_is_marked_and_resubmitted_over_the_current_version(
    client, users, submit, project, lead_promotes  # noqa: F811
):
    stale = submit(title="Rules first")
    current = lead_promotes(project)
    client.force_login(users["lead"])
    listing = client.get(reverse("proposal-list", args=["alpha"])).content.decode()
    row = listing[listing.index(f'data-proposal="{stale.pk}"') :]
    assert "⚠ stale" in row[: row.index("</tr>")]
    html = client.get(reverse("proposal-detail", args=[stale.pk])).content.decode()
    assert f"v{current.number} is current now" in html and 'id="resubmit"' in html

    response = client.post(reverse("proposal-resubmit", args=[stale.pk]))
    fresh = Proposal.objects.exclude(pk=stale.pk).latest("pk")
    assert response.status_code == 302 and response["Location"] == reverse("proposal-detail", args=[fresh.pk])
    assert fresh.base_version_id == current.pk and fresh.patch == stale.patch and fresh.title == stale.title
    assert f"from proposal #{stale.pk}" in fresh.rationale
    html = client.get(reverse("proposal-detail", args=[fresh.pk])).content.decode()
    assert "⚠ stale" not in html


def test_the_promotion_confirmation_page_is_for_leads(client, users, submit):
    proposal = submit()
    client.force_login(users["reviewer"])
    response = client.get(reverse("proposal-promote-confirm", args=[proposal.pk]))
    assert response.status_code == 403 and "it needs the project lead role" in response.content.decode()
