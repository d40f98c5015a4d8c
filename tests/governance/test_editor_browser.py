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


def _preview_text(browser) -> str:
    # read in one script: htmx swaps the preview element while we wait (an element found, then
    # read, can be gone in between)
    return browser.execute_script("const e = document.getElementById('patch-preview'); return e ? e.textContent : '';")


def _patch(browser) -> dict:
    import json

    text = browser.execute_script(
        "const e = document.getElementById('patch-preview-json'); return e ? e.textContent : '';"
    )
    return json.loads(text) if text else {}


def _tab_to(browser, label: str, limit: int = 60):
    """Press Tab until the focused element's aria-label is `label` (the keyboard's own path)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    for _ in range(limit):
        active = browser.switch_to.active_element
        if label in (active.get_attribute("aria-label"), active.text):
            return active
        ActionChains(browser).send_keys(Keys.TAB).perform()
    pytest.fail(f'{limit} presses of Tab never reached "{label}"')


def test_keyboard_only_reorders_a_class_adds_a_cue_and_the_live_patch_follows(
    project, users, browser, live_server, client
):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    def keys(*sequence):
        ActionChains(browser).send_keys(*sequence).perform()

    client.force_login(users["lead"])
    browser.get(live_server.url + reverse("login"))
    browser.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value, "path": "/"})
    browser.get(live_server.url + reverse("proposal-create", args=["alpha"]))
    wait_for(browser, lambda d: "No change yet" in _preview_text(d), message="empty patch")
    editor = "#field-wt__implementation-review .chip-editor"
    chips = lambda sel: [c.get_attribute("data-value") for c in browser.find_elements("css selector", f"{sel} li")]  # noqa: E731

    # from the title field on, only keys: Tab to "move result up", Enter
    css(browser, "#id_title").send_keys("Keyboard only")
    _tab_to(browser, "move result up")
    keys(Keys.ENTER)
    assert chips(editor) == ["decision", "result", "rule"]
    wait_for(browser, lambda d: _patch(d).get("work_types"), message="the reordered class in the patch")
    assert _patch(browser)["work_types"]["implementation-review"] == ["decision", "result", "rule"]

    # a misspelt class typed in is refused until "add anyway"
    _tab_to(browser, "type a class for implementation-review")
    keys("runbok", Keys.ENTER)
    assert "runbok" not in chips(editor)
    confirm = css(browser, f"{editor} .chip-confirm")
    assert confirm.is_displayed() and "runbok" in confirm.text
    assert browser.switch_to.active_element.get_attribute("aria-label") == "add the unknown class anyway"
    _tab_to(browser, "do not add the unknown class")
    keys(Keys.ENTER)
    assert not confirm.is_displayed() and "runbok" not in chips(editor)
    assert not css(browser, "#id_confirm_unknown_classes").is_selected()

    # a cue, typed and added with Enter: the work type turns to the long form in the patch
    _tab_to(browser, "new cue for implementation-review")
    keys("code review", Keys.ENTER)
    cue_editor = "#field-wt_cues__implementation-review .chip-editor"
    assert chips(cue_editor) == ["code review"]
    assert css(browser, "#id_wt_cues__implementation-review").get_attribute("value") == "code review"
    wait_for(
        browser,
        lambda d: isinstance(_patch(d).get("work_types", {}).get("implementation-review"), dict),
        message="the cue in the patch",
    )
    assert _patch(browser)["work_types"]["implementation-review"] == {
        "classes": ["decision", "result", "rule"],
        "cues": ["code review"],
    }
    assert browser.current_url.endswith(reverse("proposal-create", args=["alpha"])), "Enter never submits"

    # the class pull's + button, the scope's picker, the interval requirement, a new limit
    _tab_to(browser, "increase class pull")
    keys(Keys.ENTER)
    _tab_to(browser, "add a project to scope")
    keys("beta")
    _tab_to(browser, "add the chosen project to scope")
    keys(Keys.ENTER)
    assert chips("#field-scope .chip-editor") == ["alpha", "beta"]
    _tab_to(browser, "Add a limit")
    keys(Keys.ENTER)  # the next blank row appears, its metric focused
    assert browser.switch_to.active_element.get_attribute("aria-label") == "limit 2 metric"
    keys("must")
    _tab_to(browser, "limit 2 max_task_drop")
    keys("0.34")
    css(browser, "#id_gate_require_interval").send_keys(Keys.SPACE)
    wait_for(
        browser,
        lambda d: (gates := _patch(d).get("gates", {})).get("require_interval") is True
        and len(gates.get("limits", [])) == 2,
        message="class pull, scope, the interval and the limit in the patch",
    )
    patch = _patch(browser)
    assert patch["class_pull"] == 4 and patch["scope"] == ["alpha", "beta"]
    assert patch["gates"]["limits"][1] == {"metric": "must_include_recall", "max_task_drop": 0.34}
    assert not console_errors(browser)


UNLABELLED = """
return [...document.querySelectorAll(arguments[0] + ' input, ' + arguments[0] + ' select')]
  .filter(e => e.offsetParent && !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
  .map(e => e.name);
"""


@pytest.mark.parametrize("width", [390, 1440])
def test_the_stop_rule_fields_fit_a_phone_and_a_desktop_and_feed_the_live_patch(
    width, project, users, browser, live_server, client
):
    from selenium.webdriver.support.select import Select

    browser.set_window_size(width, 1000)
    client.force_login(users["lead"])
    browser.get(live_server.url + reverse("login"))
    browser.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value, "path": "/"})
    browser.get(live_server.url + reverse("proposal-create", args=["alpha"]))
    wait_for(browser, lambda d: "No change yet" in _preview_text(d), message="empty patch")
    # alpha declares no stop rule: the fields are blank, each named by its own label
    assert Select(css(browser, "#id_admission_rule")).first_selected_option.text == "— unchanged —"
    assert css(browser, "#id_admission_tier_cap").get_attribute("value") == ""
    assert browser.execute_script(UNLABELLED, "#stop-rule") == []
    for name in ("floor", "unlisted", "tier_cap", "unlisted_floor"):
        field = css(browser, f"#id_admission_{name}")
        assert field.is_displayed() and field.rect["x"] + field.rect["width"] <= width, name
    overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{overflow} px wider than the window"

    Select(css(browser, "#id_admission_rule")).select_by_value("relative")
    css(browser, "#id_admission_tier_cap").send_keys("5")
    wait_for(browser, lambda d: _patch(d).get("admission", {}).get("tier_cap") == 5, message="the stop rule")
    assert _patch(browser) == {"admission": {"rule": "relative", "tier_cap": 5}}
    assert not console_errors(browser)
