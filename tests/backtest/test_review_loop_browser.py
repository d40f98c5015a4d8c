"""The review loop in one walk, in headless Chromium, with a real Celery worker running every
backtest: a lead proposes a two-part change; a reviewer comments on a task row and rejects it with a
reason; the lead splits off the good part, which passes, is approved and promoted; another open
proposal that changes the same key is marked stale with the reason and rebased; a rollback proposal
restores the version before. Each step asserts what the person sees on the page."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from authority.selectors import current_frame_version
from authority.states import ProposalState
from backtest.models import Backtest
from governance.models import Proposal
from tests.browser import css, wait_for

from .conftest import proposal, wait_finished

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

LOOSER = '{"admission": {"floor": 0.4, "tier_cap": 7}}'  # the good part of the first proposal
BACKTEST_SECONDS = 420  # four backtests of ten tasks on a small, shared machine
BACKTESTS_TEXT = "const e = document.getElementById('backtests'); return e ? e.textContent : '';"


def _backtest_ends_in_place(browser) -> str:
    """The proposal page follows its latest backtest without a reload; its row, once it ended."""
    link = "#backtests a[href*='/backtests/']"
    wait_for(browser, lambda d: d.find_elements("css selector", link), message="a backtest")
    browser.execute_script("window.__sameDocument = true;")
    wait_for(
        browser,
        lambda d: "finished" in d.execute_script(BACKTESTS_TEXT) or "error" in d.execute_script(BACKTESTS_TEXT),
        timeout=BACKTEST_SECONDS,
        message="the backtest to end",
    )
    assert browser.execute_script("return window.__sameDocument === true;"), "the page reloaded"
    return css(browser, "#backtests tbody tr").text


def test_propose_reject_split_promote_rebase_roll_back(
    celery_worker_process, sift_users, browser, browser_login, live_server
):
    url = live_server.url
    other = proposal("all-three")  # imported with the corpus, open: it also sets the stop rule
    before = current_frame_version(project=other.project)
    try:
        _walk(url, other, before, browser, browser_login)
    finally:
        # every backtest this walk started ends before the database is flushed under the worker
        for backtest in Backtest.objects.all():
            wait_finished(backtest.pk, timeout=BACKTEST_SECONDS)


def _walk(url, other, before, browser, browser_login):
    # 1. the lead proposes a two-part change: a looser stop rule (a raw merge patch, the path a
    #    revision takes below; test_browser_journey uses the stop-rule fields), and design review
    #    without design notes (the structured editor); the page names the other open proposal on
    #    the stop rule
    browser_login("lead", "pw-lead")
    browser.get(url + reverse("proposal-create", args=["sift"]))
    css(browser, "#id_title").send_keys("Loosen the stop rule; design review drops design notes")
    css(browser, "#id_rationale").send_keys("The stop rule stops a required protocol that retrieval finds weakly.")
    css(browser, '#field-wt__design-review button[aria-label="remove design_note"]').click()
    raw = css(browser, "#id_raw_patch")
    browser.execute_script("arguments[0].closest('details').open = true;", raw)
    raw.send_keys(LOOSER)
    css(browser, "form.editor button[type=submit]").click()
    wait_for(browser, lambda d: d.find_elements("css selector", "#backtests"), message="the proposal page")
    first = Proposal.objects.get(title="Loosen the stop rule; design review drops design notes")
    assert "admission" in css(browser, f'#open-conflicts li[data-proposal="{other.pk}"]').text
    assert "finished" in _backtest_ends_in_place(browser)
    # the task set it ran on: the set as imported, recorded as v1 by this first backtest
    assert css(browser, "#backtests tbody tr td.task-set").text.startswith("v1")
    browser_login.logout()

    # 2. the reviewer comments on one task row of its backtest, then rejects: a reason is required
    browser_login("reviewer", "pw-reviewer")
    backtest = first.backtests.get()
    browser.get(url + reverse("backtest-detail", args=[backtest.pk]))
    assert "v1" in css(browser, "#task-set").text
    task_row = css(browser, "#task-rows tbody tr")
    task = task_row.get_attribute("data-task")
    task_row.find_element("css selector", "details.comment-on-task summary").click()
    task_row.find_element("css selector", "textarea[name=body]").send_keys("Design review lost its notes here.")
    task_row.find_element("css selector", "button[type=submit]").click()
    wait_for(browser, lambda d: "Comment posted." in d.page_source, message="the row comment")
    browser.get(url + reverse("proposal-detail", args=[first.pk]))
    css(browser, "#review-reject").click()
    wait_for(browser, lambda d: "a rejection needs a comment saying why" in d.page_source, message="the refusal")
    css(browser, "#proposal-review-form textarea[name=comment]").send_keys("Keep the stop rule; drop the design part.")
    css(browser, "#review-reject").click()
    wait_for(browser, lambda d: "reject recorded" in d.page_source, message="the rejection")
    browser_login.logout()

    # 3. the lead reads the thread in order, then splits: only the stop rule goes on, over the
    #    current version, replacing the rejected proposal
    browser_login("lead", "pw-lead")
    browser.get(url + reverse("proposal-detail", args=[first.pk]))
    thread = css(browser, "#timeline").text
    steps = [
        "proposed v1 → v",
        f"reviewer commented on task {task}",
        "reviewer rejected backtest",
        "Keep the stop rule; drop the design part.",
    ]
    assert [thread.index(s) for s in steps] == sorted(thread.index(s) for s in steps)
    css(browser, "#revise").click()
    title = css(browser, "#id_title")
    title.clear()
    title.send_keys("Loosen the stop rule")
    patch = css(browser, "#id_raw_patch")
    browser.execute_script("arguments[0].closest('details').open = true;", patch)
    patch.clear()
    patch.send_keys(LOOSER)
    css(browser, "#propose-form button[type=submit]").click()
    wait_for(browser, lambda d: d.find_elements("css selector", "#lineage"), message="the split proposal")
    assert f"Replaces proposal #{first.pk}" in css(browser, "#lineage").text
    split = Proposal.objects.get(supersedes=first)
    assert split.patch == json.loads(LOOSER) and split.base_version_id == before.pk
    closed = Proposal.objects.get(pk=first.pk)
    assert closed.state == ProposalState.CLOSED and f"as proposal #{split.pk}" in closed.closure.reason
    row = _backtest_ends_in_place(browser)
    assert "passed" in row, row
    browser_login.logout()

    # 4. the good change passes: the reviewer acknowledges each task it made worse and approves
    browser_login("reviewer", "pw-reviewer")
    browser.get(url + reverse("proposal-detail", args=[split.pk]))
    for box in browser.find_elements("css selector", "#regressions input[name=acknowledged]"):
        box.click()
    css(browser, "#proposal-review-form textarea[name=comment]").send_keys("The stop rule alone is fine.")
    css(browser, "#review-approve").click()
    wait_for(browser, lambda d: "approve recorded" in d.page_source, message="the approval")
    browser_login.logout()

    # 5. the lead promotes it after the confirmation page (the diff and the gate summary)
    browser_login("lead", "pw-lead")
    browser.get(url + reverse("proposal-detail", args=[split.pk]))
    css(browser, "#promote-next").click()
    css(browser, "#gate-summary")
    css(browser, "#confirm-promote").click()
    wait_for(browser, lambda d: "is now current for sift" in d.page_source, message="the promotion")
    promoted = current_frame_version(project=other.project)
    assert promoted.pk == split.frame_version_id and css(browser, "#state").text == "promoted"

    # 6. the other open proposal is stale, with the reason, in the list and on its page; the lead
    #    rebases it over the promoted version: a new proposal, backtested again
    browser.get(url + reverse("proposal-list", args=["sift"]))
    assert "stale" in css(browser, f'tr[data-proposal="{other.pk}"]').text
    browser.get(url + reverse("proposal-detail", args=[other.pk]))
    assert f"v{promoted.number} is current now" in css(browser, "#next-step").text
    reason = css(browser, "#stale-reason").text
    assert f'v{promoted.number} was promoted from proposal #{split.pk} "Loosen the stop rule"' in reason
    css(browser, "#resubmit").click()
    wait_for(browser, lambda d: "Resubmitted as proposal" in d.page_source, message="the rebase")
    rebased = Proposal.objects.get(supersedes=other)
    assert rebased.base_version_id == promoted.pk and f"proposal #{other.pk}" in css(browser, "#lineage").text
    assert Proposal.objects.get(pk=other.pk).state == ProposalState.CLOSED
    assert "finished" in _backtest_ends_in_place(browser)

    # 7. a rollback to the version before is one click in the project's history: a proposal whose
    #    patch restores it, backtested and reviewed like any other
    browser.get(url + reverse("project-detail", args=["sift"]))
    css(browser, f"#rollback-{before.number}").click()
    wait_for(browser, lambda d: f"restores v{before.number}" in d.page_source, message="the rollback proposal")
    rollback = Proposal.objects.get(kind="rollback")
    assert rollback.frame_version.snapshot == before.snapshot and rollback.base_version_id == promoted.pk
    assert f"Restores v{before.number}" in css(browser, "#lineage").text
    assert '"floor": 0.6' in css(browser, "#patch").text
    # it changes the stop rule back, which the rebased proposal also sets: the page says so while
    # that one can still land; one whose backtest failed is dead and no conflict
    rebased.refresh_from_db()
    listed = browser.find_elements("css selector", f'#open-conflicts li[data-proposal="{rebased.pk}"]')
    if rebased.state in (ProposalState.FAILED, ProposalState.REJECTED):
        assert not listed, f"proposal #{rebased.pk} is {rebased.state}: a dead proposal is no conflict"
    else:
        assert listed and "admission" in listed[0].text
    assert "finished" in _backtest_ends_in_place(browser)
