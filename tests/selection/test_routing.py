"""Routing through the services and the `select` command, on the real PostgreSQL: the seed's
cases as a script or a user meets them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

ROUTING_CORPUS = """\
name: rlab
description: A small corpus with routed memory.
standpoint: 2026-09-20T12:00:00Z
projects:
  - slug: rlab
    name: Routing lab
    frame:
      scope: [rlab]
      work_types:
        implementation-review: [rule, decision, note]
        planning: [note, rule]
        debugging: [rule]
      task_categories:
        implementation: {work_types: [implementation-review], load: [rules/output]}
        planning: {work_types: [planning], needs_scope: false}
        debugging: [implementation-review, debugging]
      modules:
        rules/output: [r-output]
        areas/storage: [a-storage]
"""

UNITS = [
    {
        "id": "r-root",
        "project": "rlab",
        "class": "rule",
        "root": True,
        "text": "Root constraint: all migrations must remain deterministic.",
    },
    {"id": "r-output", "project": "rlab", "class": "rule", "text": "Output rule: every answer leads with the diff."},
    {
        "id": "a-storage",
        "project": "rlab",
        "class": "decision",
        "paths": ["cli/**/*.py"],
        "text": "Storage area: notes persist as human-readable local JSON files.",
    },
    {
        "id": "a-web",
        "project": "rlab",
        "class": "rule",
        "paths": ["web/*"],
        "text": "Web area: the frontend never stores tokens in local storage.",
    },
    {"id": "n-1", "project": "rlab", "class": "note", "text": "Note: the storage migration is planned for next week."},
]

TASKS = """\
tasks:
  - id: t-impl
    project: rlab
    query: Add persistent session storage.
    standpoint: 2026-09-20T12:00:00Z
    budget_tokens: 400
    frame:
      objective: Persist sessions across instances.
      work_type: implementation-review
    routing:
      task_category: implementation
      paths: [cli/memory_custodian/read.py]
"""


def write_corpus(directory: Path, units=UNITS, corpus=ROUTING_CORPUS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "corpus.yaml").write_text(corpus, encoding="utf-8")
    (directory / "units.jsonl").write_text("".join(json.dumps(u) + "\n" for u in units), encoding="utf-8")
    (directory / "tasks.yaml").write_text(TASKS, encoding="utf-8")
    return directory


@pytest.fixture
def rlab(db, tmp_path):
    from selection.memory.importing import corpus_import

    return corpus_import(write_corpus(tmp_path / "rlab"))


def select_json(*args) -> tuple[int, dict]:
    """Run `select --json`; (exit status, the printed JSON object)."""
    out = io.StringIO()
    status = 0
    try:
        call_command(
            "select", "--project", "rlab", "--query", "session storage", "--json", "--budget", "400", *args, stdout=out
        )
    except CommandError as error:
        status = error.returncode
    return status, json.loads(out.getvalue())


def reasons(doc) -> dict[str, str]:
    return {d["unit"]: d["reason"] for d in doc["routing"]["dispositions"]}


def test_select_json_routing_shape_and_a_planned_path(rlab):
    status, doc = select_json("--task-category", "implementation", "--path", "cli/memory_custodian/read.py")
    assert status == 0
    routing = doc["routing"]
    assert routing["completeness"] == "COMPLETE"
    assert routing["dispositions"][0].keys() == {"unit", "disposition", "reason"}
    assert reasons(doc) == {
        "a-storage": "ROUTE_PATH",  # the planned file need not exist
        "a-web": "SKIP_NO_PATH_MATCH",
        "r-output": "ROUTE_TASK",
        "r-root": "ROUTE_ALWAYS",
    }
    assert routing["conflicts"] == []
    assert doc["bundle"]["items"][0]["sources"] == ["r-root"]


def test_no_scope_is_incomplete_and_strict_exits_1_with_no_bundle(rlab):
    from selection.models import Trace

    status, doc = select_json("--task-category", "implementation")
    assert status == 0 and doc["routing"]["completeness"] == "INCOMPLETE"
    assert reasons(doc)["a-storage"] == "SKIP_SCOPE_MISSING"
    assert doc["bundle"]["items"]  # without strict the bundle comes with its diagnostics

    status, doc = select_json("--task-category", "implementation", "--strict-routing")
    assert status == 1
    assert doc["bundle"]["items"] == []
    assert doc["routing"]["refused"] is True
    # the refusal is itself a trace
    assert Trace.objects.get(pk=doc["trace_id"]).header["routing"]["refused"] is True


def test_parent_path_is_invalid_and_strict_exits_2(rlab):
    status, doc = select_json("--task-category", "implementation", "--path", "../outside.py", "--strict-routing")
    assert status == 2
    assert doc["routing"]["completeness"] == "INVALID"
    assert any("'..'" in p for p in doc["routing"]["problems"])


def test_ambiguous_category_exits_1(rlab):
    status, doc = select_json("--task-category", "debugging", "--path", "cli/a.py", "--strict-routing")
    assert (status, doc["routing"]["completeness"]) == (1, "AMBIGUOUS")


def test_missing_required_module_exits_1(db, tmp_path):
    from selection.memory.importing import corpus_import

    corpus_import(write_corpus(tmp_path / "r", units=[u for u in UNITS if u["id"] != "r-output"]))
    status, doc = select_json("--task-category", "implementation", "--path", "cli/a.py", "--strict-routing")
    assert status == 1
    assert {"unit": "rules/output", "disposition": "missing-required", "reason": "MISSING_REQUIRED"} in doc["routing"][
        "dispositions"
    ]


def test_two_owners_conflict_on_import_and_strict_exits_2(db, tmp_path):
    units = UNITS + [
        {
            "id": "d-json",
            "project": "rlab",
            "class": "decision",
            "root": True,
            "subject": "sessions",
            "facet": "format",
            "text": "Sessions persist as JSON.",
        },
        {
            "id": "d-sqlite",
            "project": "rlab",
            "class": "decision",
            "root": True,
            "subject": "sessions",
            "facet": "format",
            "text": "Sessions persist in SQLite.",
        },
    ]
    err = io.StringIO()
    call_command("import_corpus", str(write_corpus(tmp_path / "r", units=units)), stdout=io.StringIO(), stderr=err)
    assert "structural conflict" in err.getvalue() and "d-json, d-sqlite" in err.getvalue()
    status, doc = select_json("--task-category", "implementation", "--path", "cli/a.py", "--strict-routing")
    assert status == 2
    assert doc["routing"]["conflicts"] == [{"code": "SUBJECT_FACET_CONFLICT", "units": ["d-json", "d-sqlite"]}]
    assert "a person must decide" in doc["routing"]["refusal"]


def test_path_order_and_repetition_change_nothing(rlab):
    _, a = select_json("--task-category", "implementation", "--path", "cli/a.py", "--path", "web/x.ts")
    _, b = select_json(
        "--task-category", "implementation", "--path", "web\\x.ts", "--path", "cli/a.py", "--path", "cli/a.py"
    )
    assert a["routing"] == b["routing"]
    assert a["bundle"]["digest"] == b["bundle"]["digest"]


def test_local_overlay_adds_context_never_overrides_and_no_local_gives_the_shared_digest(rlab):
    from django.contrib.auth import get_user_model

    from selection.memory.local_overlays import local_unit_put
    from selection.models import Project

    project = Project.objects.get(slug="rlab")
    get_user_model().objects.create_user("ana")
    user = get_user_model().objects.get(username="ana")
    call_command("local_memory", "add", "--user", "ana", "--project", "rlab", "--id", "me-tone",
                 "--text", "Prefer concise explanations.", stdout=io.StringIO())
    local_unit_put(user=user, project=project, uid="me-undo", text="Ignore the migration rule.", supersedes=("r-root",))
    args = ("--task-category", "implementation", "--path", "cli/a.py")
    _, shared = select_json(*args)
    _, mine = select_json(*args, "--user", "ana")
    _, no_local = select_json(*args, "--user", "ana", "--no-local")
    outcomes = {d["unit"]: d["outcome"] for d in mine["routing"]["local"]}
    assert outcomes == {"me-tone": "LOCAL_ADDED", "me-undo": "LOCAL_SUPERSEDES_SHARED"}
    admitted = [s for item in mine["bundle"]["items"] for s in item["sources"]]
    assert "me-tone" in admitted and "me-undo" not in admitted and admitted[0] == "r-root"
    assert no_local["bundle"]["digest"] == shared["bundle"]["digest"] != mine["bundle"]["digest"]


def test_local_units_are_never_exported(rlab, tmp_path):
    from django.contrib.auth import get_user_model

    from selection.memory.exporting import corpus_export
    from selection.memory.local_overlays import local_unit_put
    from selection.models import Project

    user = get_user_model().objects.create_user("bo")
    local_unit_put(user=user, project=Project.objects.get(slug="rlab"), uid="me-x", text="Private tool path.")
    out = corpus_export("rlab", tmp_path / "out")
    assert "me-x" not in (out / "units.jsonl").read_text(encoding="utf-8")


def test_task_routing_block_round_trips_byte_identical_and_drives_evaluation(rlab, tmp_path):
    from selection.corpus import read_corpus, write_corpus
    from selection.memory.exporting import corpus_export
    from selection.models import Task
    from selection.serving import selections as services

    out = corpus_export("rlab", tmp_path / "out")
    again = write_corpus(read_corpus(out), tmp_path / "again")
    assert (again / "tasks.yaml").read_bytes() == (out / "tasks.yaml").read_bytes()
    assert read_corpus(out).tasks[0].routing == {
        "task_category": "implementation",
        "paths": ["cli/memory_custodian/read.py"],
    }
    task = Task.objects.get(uid="t-impl")
    selection = services.replay_task(task=task, persist=False)
    routing = selection.result.trace.routing
    assert routing.inputs.task_category == "implementation"
    assert routing.disposition("a-storage").reason == "ROUTE_PATH"


def test_task_routing_block_errors_name_file_line_and_field(db, tmp_path):
    from selection.corpus import CorpusError, read_corpus

    directory = write_corpus(tmp_path / "r")
    tasks = TASKS.replace("paths: [cli/memory_custodian/read.py]", "paths: cli/read.py")
    (directory / "tasks.yaml").write_text(tasks, encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        read_corpus(directory)
    issue = caught.value.issues[0]
    assert issue.file == "tasks.yaml" and issue.field == "paths"
    assert "routing.paths" in issue.location and "line 12" in issue.location


def test_trace_page_and_diff_show_completeness_dispositions_and_refusal(rlab, client, django_user_model):
    from django.urls import reverse

    from authority.models import RoleGrant
    from selection.models import Project

    auditor = django_user_model.objects.create_user("aud")
    RoleGrant.objects.create(user=auditor, project=Project.objects.get(slug="rlab"), role="auditor")
    client.force_login(auditor)
    _, loose = select_json("--task-category", "implementation", "--path", "cli/a.py")
    _, refused = select_json("--task-category", "implementation", "--strict-routing")

    html = client.get(reverse("trace-detail", args=[refused["trace_id"]])).content.decode()
    section = html[html.index('id="routing"') : html.index('id="near-misses"')]
    assert ">INCOMPLETE<" in section and 'id="routing-refusal"' in section
    row = section[section.index('data-unit="a-storage"') :]
    assert "SKIP_SCOPE_MISSING" in row[: row.index("</tr>")]

    html = client.get(reverse("trace-diff"), {"a": loose["trace_id"], "b": refused["trace_id"]}).content.decode()
    assert "routing completeness" in html and "routing a-storage" in html
    assert "loaded ROUTE_PATH" in html and "skipped SKIP_SCOPE_MISSING" in html


@pytest.mark.parametrize(
    ("activation", "message"),
    [
        ("{areas/storage: sometimes}", 'activation "sometimes" is not one of task, explicit-only'),
        ("{rules/output: path}", 'task category "implementation" loads rules/output'),
    ],
)
def test_frame_activation_kinds_are_checked_on_import(db, tmp_path, activation, message):
    from selection.corpus import CorpusError, read_corpus

    corpus = ROUTING_CORPUS.replace("      modules:\n", f"      activation: {activation}\n      modules:\n")
    with pytest.raises(CorpusError) as caught:
        read_corpus(write_corpus(tmp_path / "r", corpus=corpus))
    issue = next(i for i in caught.value.issues if message in i.message)
    assert issue.file == "corpus.yaml" and "activation" in issue.location


def test_frame_activation_refuses_an_explicit_request_for_a_path_only_area(db, tmp_path):
    from selection.memory.importing import corpus_import

    corpus = ROUTING_CORPUS.replace("      modules:\n", "      activation: {areas/storage: path}\n      modules:\n")
    corpus_import(write_corpus(tmp_path / "r", corpus=corpus))
    status, doc = select_json("--task-category", "implementation", "--overlay", "areas/storage", "--strict-routing")
    assert status == 2 and doc["routing"]["completeness"] == "INVALID"
    assert {"unit": "a-storage", "disposition": "invalid", "reason": "ROUTE_INVALID"} in doc["routing"]["dispositions"]
    status, doc = select_json("--task-category", "implementation", "--path", "cli/a.py", "--strict-routing")
    assert status == 0 and doc["routing"]["completeness"] == "COMPLETE"


def test_routing_is_part_of_the_trace_digest(rlab):
    """Rewriting a stored trace's completeness (an INCOMPLETE request passed off as COMPLETE) is
    named by verify_traces: the routing report is inside the hash-chained digest."""
    from selection.models import Project, Trace
    from selection.traces.chain import verify_chain
    from tests.selection.test_trace_chain import tamper

    select_json("--task-category", "implementation")
    trace = Trace.objects.filter(project__slug="rlab").latest("chain_position")
    assert trace.header["routing"]["completeness"] == "INCOMPLETE"
    assert verify_chain(Project.objects.get(slug="rlab")).intact
    tamper(
        "UPDATE selection_trace SET header = jsonb_set(header, '{routing,completeness}', '\"COMPLETE\"') WHERE id = %s",
        [trace.pk],
    )
    report = verify_chain(Project.objects.get(slug="rlab"))
    assert not report.intact and str(trace.pk) in str(report)
