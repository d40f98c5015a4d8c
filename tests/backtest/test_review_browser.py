"""In headless Chromium: a reviewer approves a passing backtest with a regressed task only after
acknowledging that task in the review card."""

from __future__ import annotations

import pytest
from django.urls import reverse

from backtest.models import Approval
from tests.browser import css, wait_for

from .test_review_card import _finished

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_must_acknowledge_each_regressed_task_to_approve(sift_users, browser, browser_login, live_server):
    backtest, decision = _finished("looser-stop-rule")
    assert decision.passed
    browser_login("reviewer", "pw-reviewer")
    browser.get(live_server.url + reverse("proposal-detail", args=[backtest.proposal_id]))
    boxes = browser.find_elements("css selector", "#regressions input[name=acknowledged]")
    assert boxes, "the card lists the tasks that got worse"
    css(browser, "#review-approve").click()

    # refused: the summary names the unacknowledged tasks, nothing is recorded
    summary = css(browser, "#error-summary")
    assert "Acknowledge each task that got worse" in summary.text
    assert not Approval.objects.filter(backtest=backtest).exists()

    for box in browser.find_elements("css selector", "#regressions input[name=acknowledged]"):
        if not box.is_selected():
            box.click()
    css(browser, "#review-approve").click()
    wait_for(browser, lambda d: "approve recorded" in d.find_element("css selector", "main").text, message="approval")
    assert Approval.objects.get(backtest=backtest).verdict == "approve"
