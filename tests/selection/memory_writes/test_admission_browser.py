"""Done when, in the browser: an agent's unit written under candidate admission waits in the "To
admit" queue, is not selected, and is selected once a reviewer admits it on the page."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.browser import css, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUERY = "quokka reranker for tail queries"
QUOKKA = {
    "class": "design_note",
    "title": "Quokka reranker for tail queries",
    "text": "The quokka reranker reorders tail queries by click-free relevance; use it for every tail query.",
}


def _sources(user) -> tuple[str, ...]:
    from selection.serving.serve import select_for_user

    return select_for_user(user=user, project_slug="sift", query=QUERY, budget_tokens=4000).result.bundle.unit_ids()


def test_a_reviewer_admits_a_candidate_in_the_browser(browser, browser_login, live_server, people, agent,
                                                       candidate_admission):  # fmt: skip
    from selection.memory.writes.services import unit_create
    from selection.models import MemoryUnit

    uid = unit_create(actor=agent, project=candidate_admission.project, fields=QUOKKA, via="mcp").unit
    assert uid not in _sources(people["lead"])
    browser_login("lead", "pw-lead")
    browser.get(f"{live_server.url}/projects/sift/")
    css(browser, "p.tabs a[href='/projects/sift/memory/']").click()
    assert css(browser, "#admission").text == "candidate"
    css(browser, "#to-admit").click()
    card = css(browser, f"section.candidate[data-unit='{uid}']")
    assert "Quokka reranker" in card.text and "reviewer" in card.text  # the agent token's owner wrote it
    card.find_element(By.NAME, "reason").send_keys("checked against the tail report")
    card.find_element(By.CSS_SELECTOR, "button[value='admit']").click()
    wait_for(browser, lambda d: d.find_elements(By.ID, "queue-empty"), message="the queue empties")
    assert f"{uid} active: checked against the tail report" in browser.page_source
    assert MemoryUnit.objects.get(uid=uid).status == "active"
    assert uid in _sources(people["lead"])


def test_a_lead_adds_and_supersedes_a_unit_on_the_memory_page(browser, browser_login, live_server, people):
    from selection.models import MemoryUnit, UnitLink

    browser_login("lead", "pw-lead")
    browser.get(f"{live_server.url}/projects/sift/memory/")
    css(browser, "#unit-title").send_keys(QUOKKA["title"])
    css(browser, "#unit-text").send_keys(QUOKKA["text"])
    css(browser, "#unit-form button[type=submit]").click()
    wait_for(browser, lambda d: "written (active" in d.page_source, message="the write is confirmed")
    unit = MemoryUnit.objects.get(title=QUOKKA["title"])
    row = css(browser, f"tr[data-unit='{unit.uid}']")
    assert str(unit.sequence) in row.text
    row.find_element(By.LINK_TEXT, "Supersede").click()
    text = css(browser, "#unit-text")
    text.clear()
    text.send_keys("The quokka reranker is retired; tail queries go through the hybrid again.")
    css(browser, "#supersede-form button[type=submit]").click()
    wait_for(browser, lambda d: f"supersedes {unit.uid}" in d.page_source, message="the supersession is confirmed")
    assert UnitLink.objects.filter(target=unit, kind="supersedes").exists()
    assert MemoryUnit.objects.get(pk=unit.pk).valid_to is not None
