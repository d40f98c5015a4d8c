"""A rollback is never stranded, in headless Chromium with a real Celery worker: a lead promotes v2,
rolls back to v1, and v1 is current again after review (non-inferiority against v1's own recorded
replays); separately, a lead restores v1 at once through the emergency revert, a reviewer
confirms, and the backtest that follows shows its verdict on the restored version's proposal."""

from __future__ import annotations

import pytest
from django.urls import reverse

from authority.selectors import current_frame_version
from backtest.models import Backtest
from backtest.review import card
from backtest.review import services as review_services
from backtest.services import backtest_enqueue
from governance.models import Proposal
from governance.proposals import promotion
from tests.backtest.conftest import proposal, wait_finished
from tests.browser import console_errors, css, wait_for

from .screens import shoot

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

BACKTEST_SECONDS = 420
STATE = "const e = document.getElementById('state'); return e ? e.textContent.trim() : '';"


def _decided_in_place(browser) -> str:
    """The proposal page's badge moves on from backtesting without a reload; the state it reached."""
    browser.execute_script("window.__sameDocument = true;")
    state = wait_for(
        browser,
        lambda d: (s := d.execute_script(STATE)) not in ("backtesting", "proposed", "") and s,
        timeout=BACKTEST_SECONDS,
        message="the badge to leave backtesting",
    )
    assert browser.execute_script("return window.__sameDocument === true;"), "the page reloaded"
    return state


def _approve(browser, url, login, target):
    login("reviewer", "pw-reviewer")
    browser.get(url + reverse("proposal-detail", args=[target.pk]))
    for box in browser.find_elements("css selector", "#regressions input[name=acknowledged]"):
        box.click()
    css(browser, "#review-approve").click()
    wait_for(browser, lambda d: "approve recorded" in d.page_source, message="the approval")
    login.logout()


def _finish_all():
    for backtest in Backtest.objects.all():
        wait_finished(backtest.pk, timeout=BACKTEST_SECONDS)


def test_a_lead_promotes_v2_rolls_back_to_v1_and_v1_is_current_after_review(
    celery_worker_process, sift_users, browser, browser_login, live_server
):
    url = live_server.url
    looser = proposal("looser-stop-rule")
    v1 = current_frame_version(project=looser.project)
    try:
        # the lead backtests the looser stop rule; the page follows it to "passed"
        browser_login("lead", "pw-lead")
        browser.get(url + reverse("proposal-detail", args=[looser.pk]))
        css(browser, "#run-backtest").click()
        browser.get(url + reverse("proposal-detail", args=[looser.pk]))
        assert _decided_in_place(browser) == "passed"
        browser_login.logout()
        _approve(browser, url, browser_login, looser)
        browser_login("lead", "pw-lead")
        browser.get(url + reverse("proposal-detail", args=[looser.pk]))
        css(browser, "#promote-next").click()
        css(browser, "#confirm-promote").click()
        wait_for(browser, lambda d: "is now current for sift" in d.page_source, message="the promotion of v2")
        v2 = current_frame_version(project=looser.project)
        assert v2.pk == looser.frame_version_id

        # the rollback: held to "no worse" against v1's own recorded replays, it passes
        browser.get(url + reverse("project-detail", args=["sift"]))
        css(browser, f"#rollback-{v1.number}").click()
        wait_for(browser, lambda d: d.find_elements("css selector", "#lineage"), message="the rollback proposal")
        rollback = Proposal.objects.get(kind="rollback")
        assert _decided_in_place(browser) == "passed"
        standard = css(browser, "#standard").text
        assert "non-inferiority as a rollback" in standard and f"v{v1.number}'s own recorded replays" in standard
        assert "no worse" in css(browser, "#review-card").text
        shoot(browser, "rollback-passed-lead")
        browser_login.logout()
        browser_login("reviewer", "pw-reviewer")
        browser.get(url + reverse("proposal-detail", args=[rollback.pk]))
        shoot(browser, "rollback-passed-reviewer")
        browser_login.logout()
        _approve(browser, url, browser_login, rollback)
        browser_login("lead", "pw-lead")
        browser.get(url + reverse("proposal-detail", args=[rollback.pk]))
        css(browser, "#promote-next").click()
        css(browser, "#confirm-promote").click()
        wait_for(browser, lambda d: "is now current for sift" in d.page_source, message="the promotion of the rollback")
        assert css(browser, "#state").text == "promoted"
        assert current_frame_version(project=looser.project).snapshot == v1.snapshot
        assert not [e for e in console_errors(browser) if "Content Security Policy" in e]
    finally:
        _finish_all()


def _promote_v2(users):
    looser = proposal("looser-stop-rule")
    backtest = backtest_enqueue(proposal=looser, requested_by=None)
    wait_finished(backtest.pk, timeout=BACKTEST_SECONDS)
    worse = [r.task for r in card.regressed_tasks(backtest=backtest)]
    review_services.backtest_review(
        backtest=backtest, reviewer=users["reviewer"], verdict="approve", comment="ok", acknowledged=worse
    )
    promotion.proposal_promote(proposal=looser, lead=users["lead"])
    return current_frame_version(project=looser.project)


def test_a_lead_restores_v1_at_once_a_reviewer_confirms_and_the_backtest_follows(
    celery_worker_process, sift_users, browser, browser_login, live_server
):
    url = live_server.url
    try:
        v2 = _promote_v2(sift_users)
        v1 = v2.parent
        browser_login("lead", "pw-lead")
        browser.get(url + reverse("project-detail", args=["sift"]))
        css(browser, f"#rollback-{v1.number}").click()
        wait_for(browser, lambda d: d.find_elements("css selector", "#emergency-revert"), message="the rollback page")
        rollback = Proposal.objects.get(kind="rollback")
        wait_finished(rollback.backtests.get().pk, timeout=BACKTEST_SECONDS)  # the review way's backtest
        css(browser, "#revert summary").click()
        css(browser, "#revert-reason").send_keys("Recall fell in production after v2.")
        shoot(browser, "revert-ask-lead")
        css(browser, "#revert-submit").click()
        wait_for(browser, lambda d: "Asked to restore" in d.page_source, message="the request")
        assert "another lead or a reviewer" in css(browser, "#revert-waits").text
        assert current_frame_version(project=rollback.project).pk == v2.pk  # one person's word is not enough
        browser_login.logout()

        browser_login("reviewer", "pw-reviewer")
        browser.get(url + reverse("proposal-detail", args=[rollback.pk]))
        assert "Recall fell in production after v2." in css(browser, "#revert-record").text
        shoot(browser, "revert-confirm-reviewer")
        css(browser, "#revert-confirm").click()
        wait_for(browser, lambda d: f"v{v1.number} is restored" in d.page_source, message="the restore")
        assert css(browser, "#state").text == "promoted"
        assert current_frame_version(project=rollback.project).snapshot == v1.snapshot
        record = css(browser, "#revert-record").text
        assert "lead asked" in record and "reviewer confirmed" in record
        # the backtest follows and its verdict shows on the restored version's proposal
        after = rollback.backtests.order_by("-id").first()
        assert after.created_at > rollback.backtests.order_by("id").first().created_at  # a new one, after the restore
        browser.execute_script("window.__sameDocument = true;")
        wait_for(
            browser,
            lambda d: "passed" in d.find_element("css selector", "#post-hoc").text,
            timeout=BACKTEST_SECONDS,
            message="the verdict of the backtest that follows the restore",
        )
        assert browser.execute_script("return window.__sameDocument === true;"), "the page reloaded"
        post_hoc = css(browser, "#post-hoc").text
        assert f"Backtest #{after.pk}, run after the restore against v{v2.number}" in post_hoc
        assert "no worse" in post_hoc
        shoot(browser, "revert-done-reviewer")
        browser_login.logout()
        browser_login("lead", "pw-lead")
        browser.get(url + reverse("proposal-detail", args=[rollback.pk]))
        shoot(browser, "revert-done-lead")
    finally:
        _finish_all()
