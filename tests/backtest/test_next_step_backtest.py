"""Run backtest from the proposal page, and watch it there while it runs."""

from __future__ import annotations

import pytest
from django.urls import reverse

from backtest.models import Backtest

from .conftest import proposal

pytestmark = pytest.mark.django_db


def test_run_backtest_starts_one_and_the_proposal_page_follows_it(client, sift_users):
    fixture = proposal("looser-stop-rule")
    assert not Backtest.objects.filter(proposal=fixture).exists()
    client.force_login(sift_users["lead"])
    url = reverse("proposal-detail", args=[fixture.pk])
    assert 'id="run-backtest"' in client.get(url).content.decode()
    response = client.post(reverse("proposal-backtest-start", args=[fixture.pk]))
    backtest = Backtest.objects.get(proposal=fixture)
    assert response.status_code == 302 and response["Location"] == reverse("backtest-detail", args=[backtest.pk])
    html = client.get(url).content.decode()
    assert 'hx-select="#proposal-live"' in html and 'hx-trigger="every 2s"' in html
    assert f"Backtest #{backtest.pk} is queued" in html and 'id="run-backtest"' not in html
