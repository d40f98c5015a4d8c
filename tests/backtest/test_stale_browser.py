"""In headless Chromium, with a real Celery worker: a proposal goes stale when another version is
promoted; the lead resubmits it over the current version, the backtest runs, the reviewer
acknowledges the tasks that got worse and approves, and the lead confirms the promotion."""

from __future__ import annotations

import pytest
from django.urls import reverse

from authority.models import FrameVersion, Promotion
from authority.selectors import current_frame_version
from governance.models import Proposal, ProposalState
from tests.browser import css, wait_for

from .conftest import proposal

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _promote_cosmetic_change(project) -> FrameVersion:
    """Another version becomes current (a purpose rewording, written as a promotion writes it):
    every open proposal over the old version is now stale."""
    current = current_frame_version(project=project)
    version = FrameVersion.objects.create(
        project=project,
        number=FrameVersion.objects.filter(project=project).count() + 1,
        snapshot={**current.snapshot, "purpose": f"{current.snapshot.get('purpose', '')} (reworded)"},
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
    stale = proposal("wider-class-pull")
    current = _promote_cosmetic_change(stale.project)

    # the lead finds it stale, in the list and on its page, and resubmits it
    browser_login("lead", "pw-lead")
    browser.get(url + reverse("proposal-list", args=["sift"]))
    assert "stale" in css(browser, f'tr[data-proposal="{stale.pk}"]').text
    browser.get(url + reverse("proposal-detail", args=[stale.pk]))
    assert f"v{current.number} is current now" in css(browser, "#next-step").text
    css(browser, "#resubmit").click()
    wait_for(browser, lambda d: "Resubmitted as proposal" in d.page_source, message="the resubmission")
    fresh = Proposal.objects.exclude(pk=stale.pk).get(title=stale.title, base_version=current)

    # its backtest starts on submit; the proposal page follows it without a reload
    browser.execute_script("window.__sameDocument = true;")
    backtest_link = "#backtests a[href*='/backtests/']"
    wait_for(browser, lambda d: d.find_elements("css selector", backtest_link), message="a backtest")
    # read in one script: htmx swaps the part while we wait
    backtests = "const e = document.getElementById('backtests'); return e ? e.textContent : '';"
    wait_for(browser, lambda d: "finished" in d.execute_script(backtests), timeout=300, message="the backtest to end")
    assert browser.execute_script("return window.__sameDocument === true;"), "the page reloaded"
    browser_login.logout()

    # the reviewer acknowledges each task that got worse and approves
    browser_login("reviewer", "pw-reviewer")
    browser.get(url + reverse("proposal-detail", args=[fresh.pk]))
    for box in browser.find_elements("css selector", "#regressions input[name=acknowledged]"):
        box.click()
    css(browser, "#proposal-review-form input[value=approve]").click()
    css(browser, "#proposal-review-form button[type=submit]").click()
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
