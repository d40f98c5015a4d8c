"""Browser fixtures for tests marked `browser`: headless Debian Chromium driven by selenium.

Registered for every test by tests/conftest.py (pytest_plugins). Use with pytest-django's
`live_server`:

    @pytest.mark.browser
    @pytest.mark.django_db(transaction=True)
    def test_page(browser, browser_login, live_server): ...

Without Chromium the tests skip with the reason, except under CI (the CI variable set), where a
missing browser fails them: a journey that silently never ran proves nothing.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

import pytest

CHROMIUM = os.environ.get("FG_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FG_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
)
WAIT_SECONDS = 20


def _missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(path) or shutil.which(path)):
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture
def browser(tmp_path):
    """A fresh headless Chromium (its own profile directory), quit after the test."""
    reason = _missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run under CI: {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    # console messages (CSP violations, script errors) for console_errors()
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver, condition: Callable, timeout: float = WAIT_SECONDS, message: str = ""):
    """WebDriverWait(driver, timeout).until(condition), failing with `message` and the page URL.

    A condition that reads an element while a form submission is replacing the page can find the
    old page's element and lose it before reading it (StaleElementReferenceException); that poll
    counts as "not yet", like a missing element, and the next poll reads the new page.
    """
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(
            driver,
            timeout,
            poll_frequency=0.2,
            ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
        ).until(condition)
    except TimeoutException:
        pytest.fail(f"waited {timeout} s for {message or condition} on {driver.current_url}")


def css(driver, selector: str, timeout: float = WAIT_SECONDS):
    """The first element matching `selector`, once it is present."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    return wait_for(driver, ec.presence_of_element_located((By.CSS_SELECTOR, selector)), timeout, selector)


def console_errors(driver) -> list[str]:
    """Console errors since the last call (the log is drained on read): script errors, CSP refusals."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@pytest.fixture
def browser_login(browser, live_server):
    """login(username, password): signs in through the login page; logout() through the top bar."""
    from django.urls import reverse

    def login(username: str, password: str) -> None:
        browser.get(live_server.url + reverse("login"))
        css(browser, "#id_username").send_keys(username)
        css(browser, "#id_password").send_keys(password)
        css(browser, "form button[type=submit]").click()
        wait_for(
            browser,
            lambda d: (
                d.find_elements("css selector", ".topbar .who")
                and d.find_element("css selector", ".topbar .who").text == username
            ),
            message=f"{username} to be signed in",
        )

    def logout() -> None:
        css(browser, "form.logout button[type=submit]").click()
        wait_for(browser, lambda d: not d.find_elements("css selector", ".topbar .who"), message="sign-out")

    login.logout = logout  # type: ignore[attr-defined]
    return login
