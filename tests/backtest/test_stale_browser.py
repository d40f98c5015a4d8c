"""In headless Chromium, with a real Celery worker: a proposal goes stale when another version is
promoted that also changed one of its keys; the lead sees why, resolves that key and resubmits it
over the current version (a new proposal; the old one is closed), the backtest runs, the reviewer
comments on a task row, acknowledges the tasks that got worse and approves, the lead confirms the
promotion, and a rollback proposal restores the previous version in one click."""

from __future__ import annotations

import pytest
from django.urls import reverse

from authority.models import FrameVersion, Promotion
from authority.selectors import current_frame_version
from authority.states import ProposalState
from governance.models import Proposal
from tests.browser import css, wait_for

from .conftest import proposal, wait_finished

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _promote_cosmetic_change(project) -> FrameVersion:
    """Another version becomes current (a purpose rewording and a stop-rule floor of 0.5, written as
    a promotion writes it): every open proposal over the old version is now stale, and one that
    also sets the floor conflicts on that key."""
    current = current_frame_version(project=project)
    version = FrameVersion.objects.create(
        project=project,
        number=FrameVersion.objects.filter(project=project).count() + 1,
        snapshot={
            **current.snapshot,
            "purpose": f"{current.snapshot.get('purpose', '')} (reworded)",
            "admission": {**current.snapshot["admission"], "floor": 0.5},
        },
        parent=current,
        author_label="lead",
        origin="proposal",
    )
    Promotion.objects.create(
        project=project, frame_version=version, sequence=Promotion.objects.filter(project=project).count() + 1
    )
    return version


def test_a_stale_proposal_is_resubmitted_over_current_and_promoted(
    celery_worker_process, sift_users, browser, browser_login, live_server
):
    url = live_server.url
    stale = proposal("looser-stop-rule")
    current = _promote_cosmetic_change(stale.project)

    # the lead finds it stale, in the list and on its page, and resubmits it
    browser_login("lead", "pw-lead")
    browser.get(url + reverse("proposal-list", args=["sift"]))
    assert "stale" in css(browser, f'tr[data-proposal="{stale.pk}"]').text
    browser.get(url + reverse("proposal-detail", args=[stale.pk]))
    assert f"v{current.number} is current now" in css(browser, "#next-step").text
    assert "also changed admission.floor" in css(browser, "#stale-reason").text
    conflict = css(browser, '#rebase-conflicts tr[data-key="admission.floor"]')
    assert ["0.6", "0.5", "0.4"] == [c.text for c in conflict.find_elements("css selector", "code")][1:]
    conflict.find_element("css selector", "input[value=mine]").click()  # keep this proposal's 0.4
    css(browser, "#resubmit").click()
    wait_for(browser, lambda d: "Resubmitted as proposal" in d.page_source, message="the resubmission")
    fresh = Proposal.objects.exclude(pk=stale.pk).get(title=stale.title, base_version=current)
    assert (fresh.supersedes_id, fresh.frame_version.snapshot["admission"]["floor"]) == (stale.pk, 0.4)
    assert Proposal.objects.get(pk=stale.pk).state == ProposalState.CLOSED

    # its backtest starts on submit; the proposal page follows it without a reload
    browser.execute_script("window.__sameDocument = true;")
    backtest_link = "#backtests a[href*='/backtests/']"
    wait_for(browser, lambda d: d.find_elements("css selector", backtest_link), message="a backtest")
    # read in one script: htmx swaps the part while we wait
    backtests = "const e = document.getElementById('backtests'); return e ? e.textContent : '';"
    wait_for(browser, lambda d: "finished" in d.execute_script(backtests), timeout=300, message="the backtest to end")
    assert browser.execute_script("return window.__sameDocument === true;"), "the page reloaded"
    browser_login.logout()

    # the reviewer comments on one task row of the backtest, then acknowledges each task that got
    # worse and approves; the comment is in the proposal's thread, its trace diff one click away
    browser_login("reviewer", "pw-reviewer")
    backtest = fresh.backtests.get()
    browser.get(url + reverse("backtest-detail", args=[backtest.pk]))
    row = css(browser, "#task-rows tbody tr")
    task = row.get_attribute("data-task")
    row.find_element("css selector", "details.comment-on-task summary").click()
    row.find_element("css selector", "textarea[name=body]").send_keys("Is this row's loss expected?")
    row.find_element("css selector", "button[type=submit]").click()
    wait_for(browser, lambda d: "Comment posted." in d.page_source, message="the comment")
    browser.get(url + reverse("proposal-detail", args=[fresh.pk]))
    thread = css(browser, "#timeline").text
    assert f"reviewer commented on task {task}" in thread and "Is this row's loss expected?" in thread
    assert browser.find_elements("css selector", "#timeline a[href*='/traces/diff/']")
    for box in browser.find_elements("css selector", "#regressions input[name=acknowledged]"):
        box.click()
    css(browser, "#review-approve").click()
    wait_for(browser, lambda d: "approve recorded" in d.page_source, message="the approval")
    browser_login.logout()

    # the lead confirms the promotion on the page with the diff and the gate summary
    browser_login("lead", "pw-lead")
    browser.get(url + reverse("proposal-detail", args=[fresh.pk]))
    css(browser, "#promote-next").click()
    css(browser, "#gate-summary")
    css(browser, "#confirm-promote").click()
    wait_for(browser, lambda d: "is now current for sift" in d.page_source, message="the promotion")
    fresh.refresh_from_db()
    assert fresh.state == ProposalState.PROMOTED
    assert current_frame_version(project=fresh.project).pk == fresh.frame_version_id

    # a rollback to the version before is one click in the history: a proposal restoring it
    browser.get(url + reverse("project-detail", args=["sift"]))
    css(browser, f"#rollback-{current.number}").click()
    wait_for(browser, lambda d: f"restores v{current.number}" in d.page_source, message="the rollback proposal")
    rollback = Proposal.objects.get(kind="rollback")
    assert rollback.frame_version.snapshot == current.snapshot and rollback.base_version_id == fresh.frame_version_id
    assert f"Restores v{current.number}" in css(browser, "#lineage").text
    # the rollback's backtest runs on the session's worker: let it end before the database is
    # flushed under it
    for backtest in rollback.backtests.all():
        wait_finished(backtest.pk, timeout=300)
