"""The governance journey in headless Chromium, with a real Celery worker process finishing the backtest.

A lead proposes through the structured form (its stop-rule fields included) and watches the
backtest finish in place (htmx, no reload); a reviewer approves it; the lead promotes; an auditor
reads it all in the audit log and is refused a write.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from authority.states import ProposalState
from governance.models import Proposal
from tests.browser import css, wait_for

from .conftest import proposal as imported_proposal

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

PREVIEW_TEXT = "const e = document.getElementById('patch-preview'); return e ? e.textContent : '';"
JOURNEY_ACTIONS = (
    "proposal.submitted",
    "backtest.started",
    "backtest.finished",
    "backtest.approved",
    "proposal.promoted",
)


def test_propose_backtest_approve_promote_audit(celery_worker_process, sift_users, browser, browser_login, live_server):
    url = live_server.url

    # a lead proposes fixtures/context-lab's looser-stop-rule through the structured editor: floor
    # 0.4 and tier cap 7 in the stop-rule fields, and design review without design notes, so that
    # the items the looser rule admits still fit the budget the root constraint leaves (it is
    # admitted first, docs/routing.md)
    browser_login("lead", "pw-lead")
    browser.get(url + reverse("project-detail", args=["sift"]))
    css(browser, f'a[href="{reverse("proposal-create", args=["sift"])}"]').click()
    css(browser, "#id_title").send_keys("Loosen the stop rule")
    css(browser, "#id_rationale").send_keys("The stop rule stops a required protocol that retrieval finds weakly.")
    # the class list is a chip editor: design notes leave with their ✕ button
    css(browser, '#field-wt__design-review button[aria-label="remove design_note"]').click()
    for key, now, value in (("floor", "0.6", "0.4"), ("tier_cap", "5", "7")):
        field = css(browser, f"#id_admission_{key}")
        assert field.get_attribute("value") == now, f"{key} shows the current frame's value"
        field.clear()
        field.send_keys(value)
    wait_for(browser, lambda d: '"tier_cap": 7' in d.execute_script(PREVIEW_TEXT), message="the live patch")
    css(browser, "form.editor button[type=submit]").click()
    css(browser, "#backtests")
    # the patch the fixture's looser-stop-rule (imported with the corpus) holds, key for key
    assert Proposal.objects.get(title="Loosen the stop rule").patch == imported_proposal("looser-stop-rule").patch
    css(browser, "#backtests a[href*='/backtests/']").click()

    # the page polls its live fragment: progress first, then the decision, with no reload
    css(browser, "#progress progress")
    browser.execute_script("window.__sameDocument = true;")
    css(browser, "#decision", timeout=240)
    assert browser.execute_script("return window.__sameDocument === true;"), "the page reloaded"
    assert css(browser, "#backtest-live").get_attribute("data-status") == "finished"
    gates = browser.find_elements("css selector", "#gates tbody tr")
    assert len(gates) == 4 and all(row.find_element("css selector", "td.reason").text for row in gates)
    assert "passed" in css(browser, "#decision h2").text
    # plotly loads when the chart nears the screen: the reader scrolls down to it (the two-part
    # proposal's ablation card sits above it)
    browser.execute_script("arguments[0].scrollIntoView()", css(browser, "#delta-chart"))
    wait_for(browser, lambda d: d.find_elements("css selector", "#delta-chart .main-svg"), message="the chart")
    assert len(browser.find_elements("css selector", "#task-rows tbody tr")) == 10
    backtest_url = browser.current_url
    browser_login.logout()

    # a reviewer approves it from the backtest page
    browser_login("reviewer", "pw-reviewer")
    browser.get(backtest_url)
    for box in browser.find_elements("css selector", "#review-form input[name=acknowledged]"):
        box.click()  # each task that got worse, acknowledged
    css(browser, "#review-form textarea").send_keys("Recall up, precision within its allowance.")
    css(browser, "#detail-approve").click()
    wait_for(browser, lambda d: "approve recorded" in d.page_source, message="the verdict")
    browser_login.logout()

    # the lead promotes
    browser_login("lead", "pw-lead")
    proposal = Proposal.objects.get(title="Loosen the stop rule")
    browser.get(url + reverse("proposal-detail", args=[proposal.pk]))
    css(browser, "#promote-link").click()  # promotion asks first: the diff and the gate summary
    css(browser, "#gate-summary")
    css(browser, "#confirm-promote").click()
    wait_for(browser, lambda d: "is now current for sift" in d.page_source, message="the promotion")
    proposal.refresh_from_db()
    assert proposal.state == ProposalState.PROMOTED
    browser_login.logout()

    # an auditor reads every step in the audit log, and may not write
    browser_login("auditor", "pw-auditor")
    browser.get(url + reverse("audit-log") + "?project=sift")
    log = css(browser, "#audit").text
    for action in JOURNEY_ACTIONS:
        assert action in log, f"{action} is missing from the audit log"
    status = browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
        fetch(arguments[0], {method: "POST", credentials: "same-origin",
                             headers: {"X-CSRFToken": token,
                                       "Content-Type": "application/x-www-form-urlencoded"},
                             body: "backtest=" + arguments[1] + "&verdict=reject&comment=no"})
          .then(r => done(r.status), () => done(-1));
        """,
        reverse("proposal-review", args=[proposal.pk]),
        proposal.backtests.get().pk,
    )
    assert status == 403
