"""In headless Chromium: a two-part change is backtested; the reviewer comments on one task row and
rejects, with a reason (refused without one); the lead splits the change into a new proposal that
replaces the rejected one; the thread shows every step with who took it, in order."""

from __future__ import annotations

import pytest
from django.urls import reverse

from governance.models import Proposal, ProposalState
from tests.browser import css, wait_for

from .conftest import wait_finished
from .test_review_card import _finished

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_rejected_two_part_change_is_split_after_a_discussion(sift_users, browser, browser_login, live_server):
    url = live_server.url
    backtest, _decision = _finished("wider-class-pull")  # class pull 5 and design review's classes
    rejected = backtest.proposal

    browser_login("reviewer", "pw-reviewer")
    browser.get(url + reverse("backtest-detail", args=[backtest.pk]))
    row = css(browser, "#task-rows tbody tr")
    task = row.get_attribute("data-task")
    row.find_element("css selector", "details.comment-on-task summary").click()
    row.find_element("css selector", "textarea[name=body]").send_keys("Design review lost its notes here.")
    row.find_element("css selector", "button[type=submit]").click()
    wait_for(browser, lambda d: "Comment posted." in d.page_source, message="the row comment")

    browser.get(url + reverse("proposal-detail", args=[rejected.pk]))
    css(browser, "#proposal-review-form input[value=reject]").click()
    css(browser, "#proposal-review-form button[type=submit]").click()
    wait_for(browser, lambda d: "a rejection needs a comment saying why" in d.page_source, message="the refusal")
    css(browser, "#proposal-review-form input[value=reject]").click()
    css(browser, "#proposal-review-form textarea[name=comment]").send_keys("Keep the class pull; drop the design part.")
    css(browser, "#proposal-review-form button[type=submit]").click()
    wait_for(browser, lambda d: "reject recorded" in d.page_source, message="the rejection")
    browser_login.logout()

    # the lead reads the thread, then splits the change: only the class pull goes on
    browser_login("lead", "pw-lead")
    browser.get(url + reverse("proposal-detail", args=[rejected.pk]))
    thread = css(browser, "#timeline").text
    steps = [
        "proposed v1 → v",
        f"reviewer commented on task {task}",
        "reviewer rejected backtest",
        "Keep the class pull; drop the design part.",
    ]
    assert [thread.index(s) for s in steps] == sorted(thread.index(s) for s in steps)
    css(browser, "#revise").click()
    title = css(browser, "#id_title")
    title.clear()
    title.send_keys("Widen the class pull to five")
    patch = css(browser, "#id_raw_patch")
    browser.execute_script("arguments[0].closest('details').open = true;", patch)
    patch.clear()
    patch.send_keys('{"class_pull": 5}')
    css(browser, "#propose-form button[type=submit]").click()
    wait_for(browser, lambda d: "/proposals/" in d.current_url, message="the split proposal")
    split = Proposal.objects.get(supersedes=rejected)
    assert split.patch == {"class_pull": 5}
    assert f"Replaces proposal #{rejected.pk}" in css(browser, "#lineage").text
    old = Proposal.objects.get(pk=rejected.pk)
    assert old.state == ProposalState.CLOSED and f"as proposal #{split.pk}" in old.closure.reason
    # the replacing proposal's backtest runs on the session's worker: let it end before the
    # database is flushed under it
    for backtest in split.backtests.all():
        wait_finished(backtest.pk, timeout=300)
