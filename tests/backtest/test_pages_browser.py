"""Every main page as each role, at 1440 and at 390 px wide, in headless Chromium: the page never
scrolls sideways (nor does a frame diff or another table that stacks on a phone), the console
shows no error (a CSP refusal is one), log-out stays reachable, and axe-core (vendored from npm
under tests/vendor) finds no serious or critical violation.

FG_SCREENSHOTS=DIR saves a full-page screenshot of each page there, to look at.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.urls import reverse

from backtest import judging
from backtest import services as backtests
from backtest.replay import dispatch
from backtest.replay import services as replays
from tests.browser import console_errors, css

from .conftest import proposal

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parents[1] / "vendor" / "axe-core" / "axe.min.js"
WIDTHS = (1440, 390)
ROLES = ("lead", "reviewer", "auditor")
AXE_RUN = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then(
  r => done(r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
         .map(v => v.id + " (" + v.impact + "): " + v.help + " at "
                   + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", "))),
  e => done(["axe failed: " + e]));
"""


def _finished_backtest(uid: str):
    backtest = backtests.backtest_enqueue(proposal=proposal(uid), requested_by=None)
    for task_id in backtest.task_ids:
        for side in dispatch.replay_sides(backtest):
            replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side=side)
    judging.backtest_finish(backtest_id=backtest.pk)
    return backtest


def _main_pages(backtest, evaluation) -> dict[str, str]:
    from backtest.models import TaskReplay

    traces = list(TaskReplay.objects.filter(backtest=backtest).order_by("pk").values_list("trace_id", flat=True)[:2])
    pr = backtest.proposal
    return {
        "home": reverse("home"),
        "project": reverse("project-detail", args=["sift"]),
        "proposals": reverse("proposal-list", args=["sift"]),
        "propose": reverse("proposal-create", args=["sift"]),
        "proposal": reverse("proposal-detail", args=[pr.pk]),
        "frame-diff": reverse("frame-diff", args=["sift"])
        + f"?a={pr.base_version.number}&b={pr.frame_version.number}",
        "backtest": reverse("backtest-detail", args=[backtest.pk]),
        "traces": reverse("trace-list"),
        "trace": reverse("trace-detail", args=[traces[0]]),
        "trace-diff": reverse("trace-diff") + f"?a={traces[0]}&b={traces[1]}",
        "evaluations": reverse("evaluation-list", args=["context-lab"]),
        "evaluation": reverse("evaluation-detail", args=[evaluation.pk]),
        "audit": reverse("audit-log"),
        "to-label": reverse("trace-queue"),
        "label": reverse("trace-label", args=[traces[0]]),
    }


def _width(driver, width: int) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600},
    )


def _screenshot(driver, path: Path) -> None:
    import base64

    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    path.write_bytes(base64.b64decode(shot["data"]))


@pytest.mark.parametrize("role", ROLES)
def test_every_main_page_fits_the_screen_without_errors(role, sift_users, browser, browser_login, live_server):
    from selection.evaluation.ladder import evaluation_run

    backtest = _finished_backtest("looser-stop-rule")
    evaluation = evaluation_run(corpus="context-lab", conditions=["C0", "C6"])
    pages = _main_pages(backtest, evaluation)
    shots = Path(os.environ["FG_SCREENSHOTS"]) if os.environ.get("FG_SCREENSHOTS") else None
    axe = AXE.read_text()
    problems = []
    browser_login(role, f"pw-{role}")
    for width in WIDTHS:
        _width(browser, width)
        for name, path in pages.items():
            browser.get(live_server.url + path)
            css(browser, "main")
            where = f"{role} {width}px {name} ({path})"
            sideways = browser.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth;"
            )
            if sideways > 0:
                problems.append(f"{where}: the page scrolls sideways by {sideways} px")
            # a frame diff, and any table that stacks on a phone, shows every column without
            # scrolling inside its own box
            hidden = browser.execute_script(
                "return [...document.querySelectorAll('table.diff, table.stack-on-phone')].filter("
                "t => t.offsetParent && t.scrollWidth > t.clientWidth + 1).map(t => t.className);"
            )
            problems += [f"{where}: table.{t.replace(' ', '.')} scrolls sideways inside its box" for t in hidden]
            logout = browser.find_element("css selector", "form.logout button")
            if not browser.execute_script(
                "const r = arguments[0].getBoundingClientRect();"
                "return r.width > 0 && r.left >= 0 && r.right <= document.documentElement.clientWidth;",
                logout,
            ):
                problems.append(f"{where}: the log-out button is off screen")
            # axe takes seconds a page: every page at full width, and on the phone as the lead
            # (the roles differ in buttons, not layout)
            if width == WIDTHS[0] or role == "lead":
                browser.execute_script(axe)
                problems += [f"{where}: {v}" for v in browser.execute_async_script(AXE_RUN)]
            problems += [f"{where}: console: {m}" for m in console_errors(browser)]
            if shots:
                shots.mkdir(parents=True, exist_ok=True)
                _screenshot(browser, shots / f"{name}-{role}-{width}.png")
    _width(browser, 1440)
    assert not problems, json.dumps(problems, indent=1)
