"""The trace explorer in headless Chromium: from a backtest (or the history) to a trace, filter to
the MUST units it missed, verify, open a counterfactual and a diff, export the trace.

The `browser` fixture is tests/browser.py's: it skips without Chromium, and fails under CI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from django.urls import NoReverseMatch, reverse

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT = 20


def _lab_module():
    # the corpus and its helpers live in test_traces.py; import it by path (importlib mode)
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import test_traces

    return test_traces


def _login(driver, live_server, client, user) -> None:
    client.force_login(user)
    driver.get(f"{live_server.url}/login/")
    driver.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value, "path": "/"})


def _backtest_page(lab) -> str | None:
    """A finished backtest of the corpus's proposal, replayed through the backtest services, when
    the backtest app provides them; None otherwise (the journey then starts at the history).
    """
    try:
        url = reverse("backtest-detail", args=[0])
        from backtest import judging
        from backtest.models import Backtest
        from backtest.replay import services as replays
    except (NoReverseMatch, ImportError):
        return None
    from governance.models import Proposal
    from selection.engine.pipeline import ENGINE_VERSION

    proposal = Proposal.objects.get(project=lab.project)
    backtest = Backtest.objects.create(
        proposal=proposal,
        baseline_version=lab.version(1),
        candidate_version=proposal.frame_version,
        task_ids=[lab.task.pk],
        task_set_digest="browser",
        engine_version=ENGINE_VERSION,
        gates={},
        status="running",
    )
    for side in ("baseline", "candidate"):
        replays.replay_one(backtest_id=backtest.pk, task_id=lab.task.pk, side=side)
    judging.backtest_finish(backtest_id=backtest.pk)
    return url.replace("/0/", f"/{backtest.pk}/")


def test_trace_journey(browser, live_server, client, tmp_path, django_user_model):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.ui import WebDriverWait

    from authority.models import RoleGrant

    lab = _lab_module().Lab(tmp_path)
    other = lab.select(frame_version=lab.version(2)).trace
    first = lab.select().trace
    auditor = django_user_model.objects.create_user("auditor")
    RoleGrant.objects.create(user=auditor, project=lab.project, role="auditor")
    wait = WebDriverWait(browser, WAIT)
    _login(browser, live_server, client, auditor)

    # 1. to a trace: from a backtest page when the backtest app has one, else from the history
    backtest_url = _backtest_page(lab)
    if backtest_url:
        browser.get(f"{live_server.url}{backtest_url}")
        link = wait.until(ec.element_to_be_clickable((By.LINK_TEXT, "baseline")))
    else:
        browser.get(f"{live_server.url}{reverse('trace-list')}")
        link = wait.until(ec.element_to_be_clickable((By.LINK_TEXT, f"#{first.pk}")))
    link.click()
    wait.until(ec.presence_of_element_located((By.ID, "candidate-table")))
    trace_pk = int(browser.current_url.rstrip("/").split("/")[-1])
    all_rows = browser.find_elements(By.CSS_SELECTOR, "#candidate-table tbody tr[data-unit]")
    assert len(all_rows) > 3

    # 2. verify the digest (htmx POST, nothing written)
    browser.find_element(By.ID, "verify").click()
    verdict = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '[data-check="rerun"]')))
    assert "matches" in verdict.text
    assert "matches" in browser.find_element(By.CSS_SELECTOR, '[data-check="stored"]').text

    # 3. show the signal columns (htmx): a value beside its part of the rank score, and goal
    # relevance (which decides nothing) muted and tagged informational; then filter to the MUST
    # units it did not admit (htmx, no reload)
    marker = browser.find_element(By.ID, "trace-header")
    browser.find_element(By.ID, "toggle-details").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#candidate-table td[data-signal="goal_relevance"]'))
    goal = browser.find_elements(By.CSS_SELECTOR, 'td.sig-informational[data-signal="goal_relevance"]')
    entered = browser.find_elements(By.CSS_SELECTOR, "#candidate-table td.sig-entered")
    assert goal and all(g.text.endswith("informational") and "→" not in g.text for g in goal)
    assert entered and all("→" in e.text for e in entered)
    Select(browser.find_element(By.ID, "f-label")).select_by_value("MUST")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#candidate-table tbody tr[data-unit]")) < len(all_rows))
    Select(browser.find_element(By.ID, "f-disposition")).select_by_value("not-admitted")
    wait.until(lambda d: "disposition=not-admitted" in d.current_url)
    wait.until(
        lambda d: all(
            r.get_attribute("data-disposition") != "admitted"
            for r in d.find_elements(By.CSS_SELECTOR, "#candidate-table tbody tr[data-unit]")
        )
    )
    rows = browser.find_elements(By.CSS_SELECTOR, "#candidate-table tbody tr[data-unit]")
    assert rows and all("missed-must" in r.get_attribute("class") for r in rows)
    assert marker.is_displayed()  # the same document: the table was swapped, the page not reloaded
    missed = [r.get_attribute("data-unit") for r in rows]

    # 4. a counterfactual for the first missed MUST unit
    rows[0].find_element(By.CSS_SELECTOR, "a.cf").click()
    wait.until(ec.presence_of_element_located((By.ID, "cf-budget")))
    assert missed[0] in browser.find_element(By.TAG_NAME, "h1").text
    kinds = [e.get_attribute("data-kind") for e in browser.find_elements(By.CSS_SELECTOR, "section.counterfactual")]
    # every lever of the frame: budget, class order, class pull, the stop rule's fields, scope
    assert kinds[:3] == ["budget", "class_rank", "class_pull"] and kinds[-1] == "scope"
    assert any(kind.startswith("stop_") for kind in kinds[3:-1])
    assert any(
        e.get_attribute("data-found") == "true"
        for e in browser.find_elements(By.CSS_SELECTOR, "section.counterfactual")
    )

    # 5. a diff against the other frame version's trace, through the trace page's form
    browser.get(f"{live_server.url}{reverse('trace-detail', args=[trace_pk])}")
    # the picker offers the same task's traces, the other frame version first
    field = wait.until(ec.presence_of_element_located((By.ID, "diff-b")))
    Select(field).select_by_value(str(other.pk if other.pk != trace_pk else first.pk))
    field.submit()
    wait.until(ec.presence_of_element_located((By.ID, "diff-admitted")))
    assert browser.find_element(By.ID, "diff-reasons").is_displayed()

    # 6. export the trace: the page's JSON link returns the whole trace
    browser.get(f"{live_server.url}{reverse('trace-detail', args=[trace_pk])}")
    href = wait.until(ec.presence_of_element_located((By.ID, "export-json"))).get_attribute("href")
    text = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {credentials: 'same-origin'}).then(r => r.text()).then(done);",
        href,
    )
    doc = json.loads(text)
    assert doc["schema"] == "context-trace/v1" and len(doc["candidates"]) == len(all_rows)
