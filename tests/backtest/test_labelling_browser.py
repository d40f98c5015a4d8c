"""Ledgers from traces, in headless Chromium with a real Celery worker: a lead finds an
agent's request in "To label", labels the units the work needed in its candidate table, and the
task joins sift's task set as a new version; the next evaluation, run from the evaluations page on
the worker, names that version, and the list of evaluations says the task sets differ."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from selection.evaluation.ladder import evaluation_run
from selection.memory import store
from selection.models import Job, LedgerEntry, Task, TraceCandidate
from selection.serving import selections as services
from tests.browser import css, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

JOB_SECONDS = 300


def test_a_trace_labelled_in_its_candidate_table_is_named_by_the_next_evaluation(
    celery_worker_process, sift_users, browser, browser_login, live_server
):
    from selenium.webdriver.support.ui import Select

    url = live_server.url
    # an agent's request on sift (real traffic, not a replay), and an evaluation before it is labelled
    asked = Task.objects.get(uid="t1-report-design")
    trace = services.run_selection(
        project=asked.project,
        query=asked.query,
        work_frame=store.work_frame_for_task(asked),
        budget_tokens=asked.budget_tokens,
        standpoint=asked.standpoint,
        source="select",
    ).trace
    earlier = evaluation_run(corpus="context-lab", conditions="C6")
    assert earlier.result["task_sets"]["sift"] == 1
    must, harmful = TraceCandidate.objects.filter(trace=trace).order_by("position").values_list(
        "unit_uid", flat=True
    )[:2]

    # the lead finds it in "To label", opens the trace, and labels two units of its candidate table
    browser_login("lead", "pw-lead")
    css(browser, f'nav a[href="{reverse("trace-queue")}"]').click()
    css(browser, f'#queue tr[data-trace="{trace.pk}"] a[href="{reverse("trace-detail", args=[trace.pk])}"]').click()
    css(browser, "#label-trace").click()
    css(browser, "#task-uid").send_keys("design-from-traffic")
    Select(css(browser, f'#label-table tr[data-unit="{must}"] select')).select_by_value("MUST")
    Select(css(browser, f'#label-table tr[data-unit="{harmful}"] select')).select_by_value("HARMFUL")
    css(browser, "#label-submit").click()
    wait_for(browser, lambda d: d.find_elements("css selector", "#labelled"), message="the labelled task")
    assert "Task design-from-traffic joined sift's task set, now v2." in css(browser, ".messages").text
    assert css(browser, "#task-set-version").text == "v2"
    task = Task.objects.get(uid="design-from-traffic")
    assert dict(LedgerEntry.objects.filter(task=task).values_list("unit__uid", "label")) == {
        must: "MUST",
        harmful: "HARMFUL",
    }
    # it has left the queue
    browser.get(url + reverse("trace-queue"))
    assert not browser.find_elements("css selector", f'#queue tr[data-trace="{trace.pk}"]')

    # the next evaluation, run from the evaluations page on the worker, names the new version
    browser.get(url + reverse("evaluation-list", args=["context-lab"]))
    css(browser, '#run-evaluation input[value="C6"]').click()
    css(browser, "#run-evaluation button[type=submit]").click()
    wait_for(browser, lambda d: "/jobs/" in d.current_url, message="the job page")
    job = Job.objects.order_by("-pk").first()
    try:
        css(browser, "#job-result a", timeout=JOB_SECONDS).click()
    finally:  # the job ends before the database is flushed under the worker
        _job_done(job.pk)
    assert "sift v2" in css(browser, "#task-sets").text.replace("\n", " ")
    assert "design-from-traffic" in browser.page_source  # the labelled task is among those replayed

    browser.get(url + reverse("evaluation-list", args=["context-lab"]))
    assert "sift v1" in css(browser, f'tr[data-evaluation="{earlier.pk}"] td.task-set').text
    assert "These evaluations ran on different task sets" in css(browser, "#task-sets-differ").text


def _job_done(pk: int) -> None:
    deadline = time.monotonic() + JOB_SECONDS
    while Job.objects.get(pk=pk).status not in ("finished", "error"):
        if time.monotonic() > deadline:
            pytest.fail(f"job #{pk} did not end in {JOB_SECONDS} s")
        time.sleep(0.5)
