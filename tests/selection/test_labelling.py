"""Ledgers from traces: a lead or reviewer turns a trace into a labelled
evaluation task; the task joins the project's task set as a new version, with who and when; a queue
lists recent traces not yet labelled; backtests name the task-set version they replayed."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from authority.access import AccessDenied
from authority.models import AuditEntry
from selection.evaluation.scoring import ledger_for_task
from selection.evaluation.task_sets import task_set_digest, task_set_label, task_set_versions
from selection.models import LedgerEntry, Task, TaskLabelling, TaskSetVersion, TraceCandidate
from selection.traces import labelling
from tests.api.conftest import ApiClient, assert_problem

from . import test_traces

embedding_cache, lab, people = test_traces.embedding_cache, test_traces.lab, test_traces.people

pytestmark = pytest.mark.django_db


def _units(trace, n=2) -> list[str]:
    return list(TraceCandidate.objects.filter(trace=trace).order_by("position").values_list("unit_uid", flat=True)[:n])


def test_a_trace_becomes_a_labelled_task_and_a_new_task_set_version(lab, people):
    trace = lab.select().trace
    must, harmful = _units(trace)
    before = task_set_digest(project=lab.project)
    made = labelling.trace_label(
        trace=trace, user=people["reviewer"], labels={must: "MUST", harmful: "harmful"}, uid="from-traffic-1"
    )
    task = Task.objects.get(uid="from-traffic-1")
    assert (task.query, task.budget_tokens, task.project) == (trace.query, trace.budget_tokens, lab.project)
    assert task.frame.get("work_type") == trace.header["work_frame"]["work_type"]
    assert ledger_for_task(task) == {must: "MUST", harmful: "HARMFUL"}
    # the imported set is recorded as v1 at its first change; the labelled one is v2
    versions = list(TaskSetVersion.objects.filter(project=lab.project).values_list("number", "digest", "created_by"))
    assert versions == [(1, before, None), (2, task_set_digest(project=lab.project), people["reviewer"].pk)]
    assert made.version.number == 2 and before != versions[1][1]
    labelled = TaskLabelling.objects.get(trace=trace)
    assert (labelled.task, labelled.labelled_by, labelled.task_set_version) == (task, people["reviewer"], made.version)
    entry = AuditEntry.objects.get(action="task.labelled")
    assert entry.payload["task_set_version"] == 2 and "tlab's task set is now v2" in entry.summary
    assert task_set_label(before, task_set_versions(project=lab.project)) == "v1"
    with pytest.raises(IntegrityError), transaction.atomic():
        TaskSetVersion.objects.filter(project=lab.project).update(reason="x")


def test_labels_are_refused_with_why_and_nothing_written(lab, people):
    trace = lab.select().trace
    unit = _units(trace, 1)[0]
    tasks = Task.objects.count()
    with pytest.raises(AccessDenied):
        labelling.trace_label(trace=trace, user=people["auditor"], labels={unit: "MUST"})
    for labels, why in (
        ({}, "label at least one unit"),
        ({unit: "VITAL"}, "unknown label VITAL"),
        ({"no-such-unit": "MUST"}, "not candidates of trace"),
    ):
        with pytest.raises(labelling.LabellingRefused, match=why):
            labelling.trace_label(trace=trace, user=people["lead"], labels=labels)
    with pytest.raises(labelling.LabellingRefused, match="already has a task"):
        labelling.trace_label(trace=trace, user=people["lead"], labels={unit: "MUST"}, uid="t-review")
    assert Task.objects.count() == tasks and not TaskSetVersion.objects.exists() and not LedgerEntry.objects.filter(
        task__uid__startswith="trace-"
    ).exists()
    labelling.trace_label(trace=trace, user=people["lead"], labels={unit: "MUST"})
    with pytest.raises(labelling.LabellingRefused, match="already labelled"):
        labelling.trace_label(trace=trace, user=people["lead"], labels={unit: "SHOULD"}, uid="again")


def test_the_queue_lists_unlabelled_real_traffic_and_the_page_labels_it(client, lab, people):
    real = lab.select().trace
    replay = lab.select(budget=140, source="backtest").trace
    client.force_login(people["lead"])
    queue = client.get(reverse("trace-queue")).content.decode()
    assert f'data-trace="{real.pk}"' in queue and f'data-trace="{replay.pk}"' not in queue
    work_type = real.header["work_frame"]["work_type"]
    assert f'data-trace="{real.pk}"' in client.get(reverse("trace-queue"), {"work_type": work_type}).content.decode()
    assert f'data-trace="{real.pk}"' not in client.get(reverse("trace-queue"), {"work_type": "nope"}).content.decode()

    page = reverse("trace-label", args=[real.pk])
    unit = _units(real, 1)[0]
    refused = client.post(page, {"uid": "", f"label:{unit}": ""})
    assert refused.status_code == 400 and "label at least one unit" in refused.content.decode()
    done = client.post(page, {"uid": "queue-1", f"label:{unit}": "MUST"}, follow=True).content.decode()
    assert "Task queue-1 joined tlab&#x27;s task set, now v2." in done and 'id="task-set-version">v2' in done
    assert f'data-trace="{real.pk}"' not in client.get(reverse("trace-queue")).content.decode()
    client.force_login(people["auditor"])
    assert "Only a lead or a reviewer" in client.get(reverse("trace-label", args=[replay.pk])).content.decode()


def test_the_api_labels_a_trace(client, lab, people):
    from governance.tokens import services as tokens

    trace = lab.select().trace
    unit = _units(trace, 1)[0]
    lead = ApiClient(
        client, tokens.token_create(user=people["lead"], name="t", project=lab.project, role="lead", days=30).secret
    )
    response = lead.post(f"/traces/{trace.pk}/task", {"uid": "api-1", "labels": {unit: "SHOULD"}})
    assert response.status_code == 201, response.content
    assert response.json()["task_set_version"] == 2 and response.json()["labelled_by"] == "lead"
    assert_problem(lead.post(f"/traces/{trace.pk}/task", {"labels": {unit: "MUST"}}), 422)  # already labelled
    assert_problem(lead.post(f"/traces/{trace.pk}/task", {"labels": {unit: "VITAL"}}), 422)


def test_every_evaluation_names_the_task_set_version_it_ran_on(client, lab, people):
    from selection.evaluation.ladder import evaluation_run

    first = evaluation_run(corpus=lab.corpus, conditions="C6", actor=people["lead"])
    # the first run records the set as imported as v1 and names it
    assert first.result["task_sets"] == {"tlab": 1}
    assert [(v.number, v.reason) for v in first.task_set_versions.all()] == [(1, "the task set as imported")]
    again = evaluation_run(corpus=lab.corpus, conditions="C6", actor=people["lead"])
    assert again.result["task_sets"] == {"tlab": 1} and TaskSetVersion.objects.count() == 1  # same set, same version

    trace = lab.select().trace
    labelling.trace_label(trace=trace, user=people["reviewer"], labels={_units(trace, 1)[0]: "MUST"}, uid="t-new")
    latest = evaluation_run(corpus=lab.corpus, conditions="C6", actor=people["lead"])
    assert latest.result["task_sets"] == {"tlab": 2} and "t-new" in latest.result["task_info"]

    client.force_login(people["auditor"])
    page = client.get(reverse("evaluation-detail", args=[latest.pk])).content.decode()
    assert '<dd id="task-sets"><code>tlab</code> <strong>v2</strong></dd>' in page
    listed = client.get(reverse("evaluation-list", args=[lab.corpus.name])).content.decode()
    for evaluation, version in ((first, 1), (again, 1), (latest, 2)):
        row = listed[listed.index(f'data-evaluation="{evaluation.pk}"') :]
        assert f'<td class="task-set">tlab v{version}</td>' in row[: row.index("</tr>")]
    # the list compares runs over time: it says plainly that the tasks changed between them
    assert "These evaluations ran on different task sets (tlab v1; tlab v2)" in listed

    from governance.tokens import services as tokens

    api = ApiClient(
        client, tokens.token_create(user=people["lead"], name="t", project=lab.project, role="lead", days=30).secret
    )
    assert api.get(f"/evaluations/{latest.pk}").json()["task_sets"] == {"tlab": 2}
    summaries = {e["id"]: e["task_sets"] for e in api.get(f"/corpora/{lab.corpus.name}/evaluations").json()}
    assert summaries == {first.pk: {"tlab": 1}, again.pk: {"tlab": 1}, latest.pk: {"tlab": 2}}
