"""The proposal page follows its backtest in place (htmx polling from the site's own static files,
no inline script): its badge, its next step and its backtest row move from running to the
decision without a reload."""

from __future__ import annotations

import pytest
from django.urls import reverse

from backtest.models import Backtest
from tests.browser import console_errors, css, wait_for
from tests.governance.screens import shoot

from .conftest import proposal, wait_finished

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

STATE = "return document.getElementById('state').textContent.trim();"
NEXT = "const e = document.getElementById('next-step'); return e ? e.textContent : '';"


def test_the_proposal_page_moves_from_running_to_its_decision_without_a_reload(
    celery_worker_process, sift_users, browser, browser_login, live_server
):
    target = proposal("report-prose-in-design-review")  # its backtest fails its gates
    try:
        browser_login("reviewer", "pw-reviewer")
        browser.get(live_server.url + reverse("proposal-detail", args=[target.pk]))
        assert browser.execute_script(STATE) == "proposed"
        from backtest.services import backtest_enqueue

        backtest_enqueue(proposal=target, requested_by=None)
        browser.get(live_server.url + reverse("proposal-detail", args=[target.pk]))
        assert browser.execute_script(STATE) == "backtesting"
        assert "Backtest #" in browser.execute_script(NEXT)
        shoot(browser, "live-running-reviewer")
        browser.execute_script("window.__sameDocument = true;")
        wait_for(browser, lambda d: d.execute_script(STATE) == "failed", timeout=420, message="the decision")
        assert browser.execute_script("return window.__sameDocument === true;"), "the page reloaded"
        waits = css(browser, "#waits-for").text
        assert "failed its gates" in waits and "is running" not in browser.execute_script(NEXT)
        assert "failed" in css(browser, "#backtests tbody tr").text
        # the review form arrived with the decision: reject only, a failed backtest cannot be approved
        assert css(browser, "#review-reject") and not browser.find_elements("css selector", "#review-approve")
        assert not [e for e in console_errors(browser) if "Content Security Policy" in e]
        shoot(browser, "live-failed-reviewer")
        # the backtest page's review form: the same two actions, reject only here
        browser.get(live_server.url + reverse("backtest-detail", args=[target.backtests.get().pk]))
        assert css(browser, "#detail-reject") and not browser.find_elements("css selector", "#detail-approve")
        shoot(browser, "backtest-failed-reviewer")
        browser_login.logout()
        browser_login("lead", "pw-lead")
        browser.get(live_server.url + reverse("proposal-detail", args=[target.pk]))
        assert "failed its gates" in css(browser, "#waits-for").text
        shoot(browser, "live-failed-lead")
    finally:
        for backtest in Backtest.objects.all():
            wait_finished(backtest.pk, timeout=420)
