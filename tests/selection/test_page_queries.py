"""The pages `bench` times answer in a number of SQL queries that does not grow with what they show.

Each page is rendered by a lead + auditor (the bench's viewer) with a few rows and again with about
three times as many (candidates in the trace, tasks in the evaluation, entries in the audit log,
traces in the history, reviews on the proposal): the count must be the same, and under a pinned
ceiling, so a per-row query (an N+1) fails here before it shows in `bench`. The corpus is imported
through corpus_import with the packaged model (vectors cached per text for the module).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.selection.test_traces import embedding_cache  # noqa: F401 (the module's vector cache)

# pinned ceilings: the counts each page issues (docs/performance.md, "Pages");
# a page that needs more has grown a query: find it before raising the number
TRACE_PAGE_MAX = 14  # a trace with near misses (their units and links are read in two queries)
EVALUATION_PAGE_MAX = 4  # the page renders the stored evaluation document
AUDIT_LOG_MAX = 7
TRACE_HISTORY_MAX = 7  # the page with its filter form, as measured; the test above shows it never grows with traces
TRACE_HISTORY_UNIT_MAX = 8  # filtered by a unit: its dispositions in the page's traces, one query
PROPOSAL_PAGE_MAX = 21  # its thread, stale reason, conflicts and lineage included

WORDS = (
    "budget ranking review evidence context memory frame retrieval recall precision token "
    "bundle trace signal stage policy corpus project baseline measure class pull window"
).split()
CLASSES = ("rule", "result", "note", "design")


def write_corpus(directory: Path, name: str, *, units: int = 60, tasks: int = 1) -> Path:
    """A corpus `name` with one project `name` (and a neighbour), `units` units, `tasks` tasks."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "corpus.yaml").write_text(
        f"name: {name}\nstandpoint: 2026-09-20T12:00:00Z\nprojects:\n"
        f"  - slug: {name}\n    name: Pages {name}\n    frame:\n      scope: [{name}]\n"
        "      default_classes: [rule, result]\n      class_pull: 2\n"
        "      work_types:\n        review: [rule, result, note, design]\n"
        f"  - slug: {name}-n\n    name: Neighbour {name}\n    frame:\n      scope: [{name}-n]\n",
        encoding="utf-8",
    )
    rows = []
    for i in range(units):
        words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(4)]
        rows.append({
            "id": f"u{i:03d}", "project": f"{name}-n" if i % 9 == 0 else name,
            "class": CLASSES[i % len(CLASSES)], "title": f"Unit {i}",
            "text": f"budget {' '.join(words)} number {i}.",
            "created_at": f"2026-0{1 + i % 8}-1{i % 10}T10:00:00Z",
            **({"echo_of": f"u{i - 5:03d}"} if i % 23 == 5 else {}),
        })
    (directory / "units.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    lines = ["tasks:"]
    for t in range(tasks):
        lines += [
            f"  - id: t{t}", f"    project: {name}",
            f"    query: What does the budget rule say about {WORDS[t % len(WORDS)]} review?",
            "    standpoint: 2026-09-20T12:00:00Z", "    budget_tokens: 40",
            "    frame:", "      objective: Review the budget rule.", "      work_type: review",
            "    ledger:", f"      u{1 + t:03d}: MUST", f"      u{2 + t:03d}: SHOULD",
        ]
    (directory / "tasks.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "proposals.yaml").write_text(
        f"proposals:\n  - id: notes-first\n    project: {name}\n    title: Notes first\n"
        "    patch:\n      work_types:\n        review: [note, rule, result, design]\n",
        encoding="utf-8",
    )
    return directory


def imported(tmp_path: Path, name: str, **kwargs):
    from selection.memory.importing import corpus_import
    from selection.models import Project

    corpus = corpus_import(write_corpus(tmp_path / name, name, **kwargs))
    return corpus, Project.objects.get(slug=name)


def viewer(django_user_model, *projects, username="viewer"):
    """The bench's viewer: lead and auditor of each project."""
    from authority.services import role_grant

    user, _ = django_user_model.objects.get_or_create(username=username)
    for project in projects:
        for role in ("lead", "auditor"):
            role_grant(user=user, project=project, role=role)
    return user


def queries(client, url: str) -> int:
    """The page's SQL queries on a warm second request (the first one fills caches)."""
    assert client.get(url).status_code == 200
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.status_code
    return len(captured.captured_queries)


def sql(client, url: str) -> list[str]:
    client.get(url)
    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    return [q["sql"][:300] for q in captured.captured_queries]


def wide_trace(project, pool: int):
    """A C6 trace of the project's first task with a candidate pool of `pool` (as bench makes)."""
    from selection.engine.types import EngineConfig
    from selection.memory import store
    from selection.models import Task
    from selection.serving import selections as services

    task = Task.objects.filter(project=project).order_by("position", "uid").first()
    number, frame = services.frame_for(project)
    inputs = services.SelectionInputs(
        project_frame=frame, work_frame=store.work_frame_for_task(task), query=task.query,
        budget_tokens=task.budget_tokens, standpoint=task.standpoint, use_dense=False,
    )
    # a fixed pool (never widened): the test compares a pool of 10 with one of 30
    config = EngineConfig(pool_size=pool, lexical_k=pool + 20, dense_k=pool + 20, pool_widen_max=pool)
    result = services.selection_run(inputs, store.corpus_index(project.corpus_id), config=config)
    return services.trace_write(result, project=project, frame_version=number, task=task, source="select")


def select_once(project, task):
    from selection.memory import store
    from selection.serving import selections as services

    return services.run_selection(
        project=project, query=task.query, work_frame=store.work_frame_for_task(task),
        budget_tokens=task.budget_tokens, standpoint=task.standpoint, task=task, use_dense=False,
    ).trace


@pytest.mark.django_db
def test_trace_page_queries_do_not_grow_with_candidates(tmp_path, client, django_user_model,
                                                        django_assert_max_num_queries):
    _, project = imported(tmp_path, "pq-trace")
    client.force_login(viewer(django_user_model, project))
    small, large = wide_trace(project, 10), wide_trace(project, 30)
    n_small, n_large = small.candidates.count(), large.candidates.count()
    assert n_large >= 2.5 * n_small > 0
    # both have near misses (budget-omitted candidates), whose units the page reads in two queries
    for trace in (small, large):
        assert trace.candidates.filter(disposition="budget_omitted").exists()
    pages = {
        trace.pk: queries(client, reverse("trace-detail", args=[trace.pk])) for trace in (small, large)
    }
    if pages[small.pk] != pages[large.pk]:
        for t in (small, large):
            print("\n=== trace", t.pk)
            for q in sql(client, reverse("trace-detail", args=[t.pk])):
                print(q)
    assert pages[small.pk] == pages[large.pk], pages
    with django_assert_max_num_queries(TRACE_PAGE_MAX):
        assert client.get(reverse("trace-detail", args=[large.pk])).status_code == 200
    # the candidate table as htmx swaps it in (sorted by a signal, filtered)
    url = reverse("trace-detail", args=[large.pk]) + "?sort=-goal_relevance&disposition=not-admitted"
    with django_assert_max_num_queries(TRACE_PAGE_MAX):
        response = client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="candidates")
    assert response.status_code == 200


@pytest.mark.django_db
def test_evaluation_page_queries_do_not_grow_with_tasks(tmp_path, client, django_user_model,
                                                        django_assert_max_num_queries):
    from selection.evaluation.ladder import evaluation_run

    few, few_project = imported(tmp_path, "pq-few", tasks=2)
    many, many_project = imported(tmp_path, "pq-many", tasks=6)
    client.force_login(viewer(django_user_model, few_project, many_project))
    counts = {}
    for corpus in (few, many):
        evaluation = evaluation_run(corpus=corpus, conditions="C0,C6")
        counts[corpus.name] = (evaluation.runs.count(),
                               queries(client, reverse("evaluation-detail", args=[evaluation.pk])))
    assert counts["pq-many"][0] == 3 * counts["pq-few"][0]
    assert counts["pq-many"][1] == counts["pq-few"][1], counts
    with django_assert_max_num_queries(EVALUATION_PAGE_MAX):
        assert client.get(reverse("evaluation-detail", args=[evaluation.pk])).status_code == 200


@pytest.mark.django_db
def test_audit_log_queries_do_not_grow_with_entries(tmp_path, client, django_user_model,
                                                    django_assert_max_num_queries):
    from authority.audit import audit_record
    from authority.models import AuditEntry

    _, project = imported(tmp_path, "pq-audit")
    neighbour = project.corpus.projects.exclude(pk=project.pk).get()
    user = viewer(django_user_model, project, neighbour)
    client.force_login(user)

    def add(n: int) -> None:  # entries by different people, in both projects
        with transaction.atomic():
            for i in range(n):
                actor = django_user_model.objects.create_user(f"actor{AuditEntry.objects.count()}")
                audit_record(actor=actor, project=(project, neighbour)[i % 2], action="role.granted",
                             obj=actor, summary=f"entry {i}")

    add(8)
    before = (AuditEntry.objects.count(), queries(client, reverse("audit-log")))
    add(16)
    after = (AuditEntry.objects.count(), queries(client, reverse("audit-log")))
    assert after[0] >= 3 * 8 and after[0] <= 50  # all on the first page
    assert after[1] == before[1], (before, after)
    filtered = reverse("audit-log") + f"?project={project.slug}&action=role.granted"
    for url in (reverse("audit-log"), filtered):
        with django_assert_max_num_queries(AUDIT_LOG_MAX):
            assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_trace_history_queries_do_not_grow_with_traces(tmp_path, client, django_user_model,
                                                       django_assert_max_num_queries):
    from selection.models import Task, Trace

    _, project = imported(tmp_path, "pq-history", tasks=3)
    client.force_login(viewer(django_user_model, project))
    tasks = list(Task.objects.filter(project=project))
    for i in range(5):
        select_once(project, tasks[i % len(tasks)])
    unit = "u001"
    urls = (reverse("trace-list"), reverse("trace-list") + f"?unit={unit}")
    before = [queries(client, url) for url in urls]
    for i in range(10):
        select_once(project, tasks[i % len(tasks)])
    assert Trace.objects.filter(project=project).count() == 15
    after = [queries(client, url) for url in urls]
    assert after == before
    for url, ceiling in zip(urls, (TRACE_HISTORY_MAX, TRACE_HISTORY_UNIT_MAX), strict=True):
        with django_assert_max_num_queries(ceiling):
            assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_proposal_page_queries_are_pinned(tmp_path, client, django_user_model, django_assert_max_num_queries):
    # before its first backtest (a backtest needs the Celery worker: the bench's proposal has one)
    from governance.models import Proposal

    _, project = imported(tmp_path, "pq-proposal")
    client.force_login(viewer(django_user_model, project))
    proposal = Proposal.objects.get(project=project)
    url = reverse("proposal-detail", args=[proposal.pk])
    with django_assert_max_num_queries(PROPOSAL_PAGE_MAX):
        assert client.get(url).status_code == 200
