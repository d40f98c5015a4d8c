"""The project page's frame health in headless Chromium at a desktop (1440 px) and a phone (390 px)
width: the charts draw under the strict CSP, fit the width, and the alert and the table are there.

Screenshots go to FG_SCREENSHOT_DIR when it is set (the issue asked that they be looked at)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from authority.selectors import current_frame_version
from authority.services import frame_version_create, promotion_create
from backtest.health import services as health
from backtest.models import FrameHealth
from tests.browser import console_errors, css

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

START = datetime(2026, 11, 20, 4, tzinfo=UTC)


def _readings(project, lead, monkeypatch, days: int = 10, strict_from: int = 6):
    """A reading a day (the clock, a boundary we do not own, set to each day); from `strict_from`
    on, the project declares a precision floor its frame does not reach."""
    for day in range(days):
        at = START + timedelta(days=day)
        monkeypatch.setattr(timezone, "now", lambda at=at: at)
        if day == strict_from:
            current = current_frame_version(project=project)
            gates = current.snapshot["gates"]
            latest = FrameHealth.objects.filter(project=project).last()
            floor = round(min(1.0, latest.means["precision"] + 0.1), 3)
            strict = {**gates, "limits": [*gates["limits"], {"metric": "precision", "min": floor}]}
            version = frame_version_create(
                project=project, snapshot={**current.snapshot, "gates": strict}, parent=current, author=lead,
                origin="proposal",
            )  # fmt: skip
            promotion_create(project=project, frame_version=version, promoted_by=lead)
        health.health_check(project=project, trigger="schedule", key=f"schedule:{at.date()}")
    monkeypatch.undo()


@pytest.mark.parametrize("width", [1440, 390])
def test_the_health_charts_fit_a_desktop_and_a_phone(
    width, sift, sift_users, browser, browser_login, live_server, monkeypatch
):
    _readings(sift, sift_users["lead"], monkeypatch)
    browser.set_window_size(width, 1000)
    browser_login("reviewer", "pw-reviewer")
    browser.get(live_server.url + reverse("project-detail", args=["sift"]))
    section = css(browser, "#health")
    assert "fails precision min" in css(browser, "#health-alert").text
    charts = browser.find_elements("css selector", "svg.health-chart")
    assert len(charts) == 4
    for chart in charts:
        assert chart.is_displayed() and chart.size["width"] >= 280, chart.size
        assert chart.size["width"] <= width
    precision = browser.find_element("css selector", "svg#health-precision")
    assert len(precision.find_elements("css selector", ".point")) == 10
    assert len(precision.find_elements("css selector", ".point.failing")) == 4
    # the page does not scroll sideways at either width
    overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{overflow} px wider than the window"
    assert css(browser, "#health-table summary").is_displayed()
    assert console_errors(browser) == []
    out = os.environ.get("FG_SCREENSHOT_DIR")
    if out:
        browser.execute_script("arguments[0].scrollIntoView()", section)
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(width, min(height + 200, 4000))
        Path(out).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(out) / f"project-health-{width}.png"))
        section.screenshot(str(Path(out) / f"project-health-section-{width}.png"))
