"""Layout in headless Chromium: at 1440 px no table's box overflows its card (a table that needs a
scroll bar inside its card fails too, not only one that scrolls the page), and on a 390 px phone
the columns that decide (a gate's result and reason, a candidate's disposition and reason, a
labeller's label and disposition) are on screen before anything scrolls, and the editor's live
patch comes before Submit.

The candidate table is the one table wider than its card by design: its unit, disposition and
reason columns stay in view (sticky) while its twenty-odd other columns scroll; the test checks
those three instead.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.browser import css, wait_for

from .test_pages_browser import _finished_backtest, _width

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCROLLS_BY_DESIGN = ("candidate-table",)
OVERFLOWING = """
const skip = arguments[0];
return [...document.querySelectorAll('main table')].filter(t => t.offsetParent && !skip.includes(t.id))
  .map(t => {
    const card = t.closest('.card') || document.querySelector('main');
    const box = card.getBoundingClientRect(), r = t.getBoundingClientRect();
    return [t.id || t.className || 'table', Math.round(r.right - box.right), Math.round(box.left - r.left)];
  }).filter(([, right, left]) => right > 1 || left > 1);
"""
IN_VIEW = """
return [...document.querySelectorAll(arguments[0])].filter(e => e.offsetParent).slice(0, 3).map(e => {
  const r = e.getBoundingClientRect();
  return r.width > 0 && r.left >= 0 && r.right <= document.documentElement.clientWidth + 1;
});
"""


def _pages(backtest) -> dict[str, str]:
    from backtest.models import TaskReplay

    traces = list(TaskReplay.objects.filter(backtest=backtest).order_by("pk").values_list("trace_id", flat=True)[:2])
    trace = traces[0]
    return {
        "project": reverse("project-detail", args=["sift"]),
        "proposal": reverse("proposal-detail", args=[backtest.proposal.pk]),
        "backtest": reverse("backtest-detail", args=[backtest.pk]),
        "traces": reverse("trace-list"),
        "trace": reverse("trace-detail", args=[trace]),
        "trace-diff": reverse("trace-diff") + f"?a={traces[0]}&b={traces[1]}",
        "then-and-now": reverse("trace-now", args=[trace]),
        "label": reverse("trace-label", args=[trace]),
        "unit": reverse("unit-detail", args=["context-lab", "sf-rule-ship-v1"]),
        "counterfactual": reverse("trace-counterfactual", args=[trace, "sf-rule-ship-v1"]),
        "glossary": reverse("glossary"),
        "audit": reverse("audit-log"),
        "propose": reverse("proposal-create", args=["sift"]),
        "retention": reverse("project-retention", args=["sift"]),
        "webhooks": reverse("project-webhooks", args=["sift"]),
    }


def test_no_table_overflows_its_card_at_desktop_width(sift_users, browser, browser_login, live_server):
    backtest = _finished_backtest("looser-stop-rule")
    pages = _pages(backtest)
    browser_login("lead", "pw-lead")
    _width(browser, 1440)
    problems = []
    for name, path in pages.items():
        browser.get(live_server.url + path)
        css(browser, "main")
        if name == "trace":  # the digest checks open in place
            css(browser, "#verify").click()
            css(browser, "#verify-result table.checks")
        for table, right, left in browser.execute_script(OVERFLOWING, list(SCROLLS_BY_DESIGN)):
            problems.append(f"{name} ({path}): table {table} overflows its card by {max(right, left)} px")
        if name == "trace":
            for column in ("th.col-unit", "td.col-disposition", "td.col-reason"):
                if not all(browser.execute_script(IN_VIEW, f"#candidate-table {column}")):
                    problems.append(f"trace: the candidate table's {column} is off screen")
    assert not problems, json.dumps(problems, indent=1)


def test_on_a_phone_the_columns_that_decide_come_first(sift_users, browser, browser_login, live_server):
    backtest = _finished_backtest("looser-stop-rule")
    pages = _pages(backtest)
    browser_login("lead", "pw-lead")
    _width(browser, 390)
    problems = []
    deciding = {
        "backtest": ("#gates td.reason", "#gates .badge.passed, #gates .badge.failed"),
        "trace": ("#candidate-table td.col-disposition", "#candidate-table td.col-reason"),
        "label": ("#label-table select", "#label-table td.col-disposition"),
    }
    for name, selectors in deciding.items():
        browser.get(live_server.url + pages[name])
        css(browser, "main")
        for selector in selectors:
            seen = browser.execute_script(IN_VIEW, selector)
            if not seen or not all(seen):
                problems.append(f"{name} at 390 px: {selector} is not on screen")
    browser.get(live_server.url + pages["propose"])
    panel, submit = css(browser, ".patch-panel"), css(browser, "#propose-form button[type=submit]")
    wait_for(browser, lambda d: panel.rect["height"] > 0)
    if not panel.rect["y"] < submit.rect["y"]:
        problems.append("propose at 390 px: the live patch sits below Submit")
    _width(browser, 1440)
    assert not problems, json.dumps(problems, indent=1)
