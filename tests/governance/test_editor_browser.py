"""The chip editor in headless Chromium: reorder by keyboard, add from the corpus's classes, and
watch the merge patch beside the form follow."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.browser import console_errors, css, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_chips_reorder_by_keyboard_and_the_patch_follows(project, users, browser, live_server, client):
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.select import Select

    client.force_login(users["lead"])
    browser.get(live_server.url + reverse("login"))
    browser.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value, "path": "/"})
    browser.get(live_server.url + reverse("proposal-create", args=["alpha"]))
    # read in one script: htmx swaps the preview element while we wait
    preview = lambda: browser.execute_script("const e = document.getElementById('patch-preview'); return e ? e.textContent : '';")  # noqa: E731,E501
    wait_for(browser, lambda d: "No change yet" in preview(), message="the empty patch")

    editor = "#field-wt__implementation-review .chip-editor"
    chips = lambda: [c.get_attribute("data-class") for c in browser.find_elements("css selector", f"{editor} li")]  # noqa: E731
    assert chips() == ["decision", "rule", "result"]
    # keyboard only: focus "move rule up" and press Enter
    css(browser, f'{editor} button[aria-label="move rule up"]').send_keys(Keys.ENTER)
    assert chips() == ["rule", "decision", "result"]
    focused = browser.switch_to.active_element.get_attribute("aria-label")
    assert focused == "move rule up", "focus stays on the moved chip's button"
    wait_for(browser, lambda d: '"rule",' in preview(), message="the patch")
    text = css(browser, "#patch-preview-json").text
    assert '"implementation-review": [' in text and text.index('"rule"') < text.index('"decision"')

    # add a class the corpus carries from the picker
    Select(css(browser, f"{editor} select.chip-picker")).select_by_value("convention")
    css(browser, f'{editor} button[aria-label="add the chosen class to implementation-review"]').click()
    assert chips() == ["rule", "decision", "result", "convention"]
    wait_for(browser, lambda d: '"convention"' in preview(), message="the added class")
    assert css(browser, "#id_wt__implementation-review").get_attribute("value") == "rule\ndecision\nresult\nconvention"
    assert not console_errors(browser)
