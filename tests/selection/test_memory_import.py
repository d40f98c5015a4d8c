"""`import_memory`: the MemoryCustodian markdown layout imported as a corpus, routed as described."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from selection.corpus import CorpusError
from selection.corpus.memory_markdown import read_memory_directory
from selection.memory.markdown_import import memory_import
from selection.models import MemoryUnit, UnitLink

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "nightnotes-memory"


def test_entries_become_units_with_lower_case_ids_keeping_the_original_visible():
    frame, units = read_memory_directory(FIXTURE, project="nightnotes")
    by_id = {u["id"]: u for u in units}
    decision = by_id["mc-dec-20260926-00000002"]
    assert decision["title"] == "MC-DEC-20260926-00000002 — Session store as local JSON"
    assert decision["root"] is True  # decisions.md is always loaded
    assert decision["supersedes"] == ["mc-dec-20260926-00000001"]  # from Superseded-By
    assert decision["text"].endswith("Evidence: design review 2026-09-26")
    assert (decision["subject"], decision["facet"]) == ("project/session-store", "format")
    assert by_id["mc-are-20260915-00000001"]["paths"] == ["cli/nightnotes/store*.py", "cli/nightnotes/storage/**"]
    assert by_id["rules.output"]["class"] == "rule"  # a module file without entries: one unit
    # a heading with several categories; Load: is required, Load if present: optional
    impl = frame["task_categories"]["implementation"]
    assert frame["task_categories"]["debugging"]["load"] == impl["load"]
    assert "constraints" in impl["load"] and "rules/testing" in impl["load_if_present"]
    assert frame["explicit_only"] == ["profiles/docs"]


def write_fixture(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    shutil.copytree(FIXTURE, target)
    return target


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        ("decisions.md", "## MC-DEC-20260926-00000002 — Session", "## MC-DEC-20260926-00000002 - Session", "em dash"),
        ("decisions.md", "Status: active", "Status: draft", 'status "draft"'),
        ("manifest.md", "## Always load", "## Sometimes load", "unknown manifest section"),
        ("manifest.md", "  - activation: explicit-only", "  - activation: whenever", 'activation "whenever"'),
        ("decisions.md", "Superseded-By: MC-DEC-20260926-00000002", "Superseded-By: MC-DEC-1", "no module entry"),
        ("manifest.md", "- `areas/web.md`\n", "- `areas/web.md`\n  - tasks: review\n", "lists tasks"),
        ("manifest.md", "- `rules/output.md`\n", "- `rules/output.md`\n  - paths: `cli/*`\n", "lists paths"),
    ],
)
def test_anything_not_understood_is_an_error_naming_file_and_line(tmp_path, file, old, new, message):
    repo = write_fixture(tmp_path)
    path = repo / "docs" / "memory" / file
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    line = text[: text.index(old)].count("\n") + 1
    with pytest.raises(CorpusError) as caught:
        read_memory_directory(repo, project="nightnotes")
    issue = next(i for i in caught.value.issues if message in i.message)
    assert issue.file == f"docs/memory/{file}" and issue.location == f"line {line}"


def select_json(*args):
    out = io.StringIO()
    status = 0
    try:
        call_command(
            "select",
            "--project",
            "nightnotes",
            "--query",
            "add persistent session storage",
            "--json",
            "--budget",
            "2000",
            *args,
            stdout=out,
        )
    except CommandError as error:
        status = error.returncode
    return status, json.loads(out.getvalue())


def test_import_memory_routes_as_the_manifest_says_and_reimport_applies_the_difference(db, tmp_path):
    repo = write_fixture(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "import_memory", str(repo), "--corpus", "nightnotes-memory", "--project", "nightnotes", stdout=out, stderr=err
    )
    assert "memory version 1" in out.getvalue()
    assert "areas/web is enabled in the manifest but absent" in err.getvalue()

    status, doc = select_json(
        "--task-category", "implementation", "--path", "cli/nightnotes/store.py", "--strict-routing"
    )
    reasons = {d["unit"]: (d["disposition"], d["reason"]) for d in doc["routing"]["dispositions"]}
    assert status == 0 and doc["routing"]["completeness"] == "COMPLETE"
    assert reasons["mc-con-20260901-00000001"] == ("loaded", "ROUTE_ALWAYS")
    assert reasons["mc-are-20260915-00000001"] == ("loaded", "ROUTE_PATH")
    assert reasons["rules.output"] == ("loaded", "ROUTE_TASK")
    assert reasons["mc-rul-20260910-00000001"] == ("skipped", "SKIP_TASK_MISMATCH")
    assert reasons["profiles.docs"] == ("skipped", "SKIP_NOT_REQUESTED")
    assert reasons["rules/testing"] == ("missing-optional", "MISSING_OPTIONAL")
    assert "mc-dec-20260926-00000001" not in reasons  # superseded: history, not governed
    sources = [s for item in doc["bundle"]["items"] for s in item["sources"]]
    assert sources[0] == "brief"  # root units first

    status, doc = select_json("--task-category", "implementation", "--strict-routing")
    assert status == 1 and doc["routing"]["completeness"] == "INCOMPLETE"

    # a second owner of session-store/format, then re-import: the difference applied, a warning
    decisions = repo / "docs" / "memory" / "decisions.md"
    decisions.write_text(
        decisions.read_text(encoding="utf-8")
        + (
            "\n## MC-DEC-20261001-00000003 — Session store in memory\nStatus: active\nScope: project\n"
            "Subject: session-store\nFacet: format\n\nKeep sessions in memory only.\n"
        ),
        encoding="utf-8",
    )
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "import_memory", str(repo), "--corpus", "nightnotes-memory", "--project", "nightnotes", stdout=out, stderr=err
    )
    assert "memory version 2" in out.getvalue() and "+ mc-dec-20261001-00000003" in out.getvalue()
    assert "mc-dec-20260926-00000002, mc-dec-20261001-00000003" in err.getvalue()
    status, doc = select_json(
        "--task-category", "implementation", "--path", "cli/nightnotes/store.py", "--strict-routing"
    )
    assert status == 2 and doc["routing"]["conflicts"][0]["units"] == [
        "mc-dec-20260926-00000002",
        "mc-dec-20261001-00000003",
    ]


KINDS_MANIFEST = """# Kinds manifest

## Always load

- `brief.md`

## Load by task

### Implementation
Load: `brief.md`

### Planning
Load: `brief.md`

## Optional module index

### Enabled rules

- `rules/task.md`
  - activation: task
  - tasks: implementation
- `rules/either.md`
  - activation: task-or-explicit
  - tasks: implementation

### Enabled profiles

- `profiles/asked.md`
  - activation: explicit-only

### Enabled areas

- `areas/path.md`
  - activation: path
  - paths: `src/**`
- `areas/either.md`
  - activation: path-or-explicit
  - paths: `src/**`
"""

# module -> trigger -> (disposition, reason); explicit requests a kind does not name are refused
KINDS_TABLE = {
    "rules/task": {
        "task": ("loaded", "ROUTE_TASK"),
        "path": ("skipped", "SKIP_TASK_MISMATCH"),
        "explicit": ("invalid", "ROUTE_INVALID"),
    },
    "rules/either": {
        "task": ("loaded", "ROUTE_TASK"),
        "path": ("skipped", "SKIP_TASK_MISMATCH"),
        "explicit": ("loaded", "ROUTE_EXPLICIT"),
    },
    "profiles/asked": {
        "task": ("skipped", "SKIP_NOT_REQUESTED"),
        "path": ("skipped", "SKIP_NOT_REQUESTED"),
        "explicit": ("loaded", "ROUTE_EXPLICIT"),
    },
    "areas/path": {
        "task": ("skipped", "SKIP_SCOPE_MISSING"),
        "path": ("loaded", "ROUTE_PATH"),
        "explicit": ("invalid", "ROUTE_INVALID"),
    },
    "areas/either": {
        "task": ("skipped", "SKIP_SCOPE_MISSING"),
        "path": ("loaded", "ROUTE_PATH"),
        "explicit": ("loaded", "ROUTE_EXPLICIT"),
    },
}


def test_imported_activation_kinds_admit_exactly_the_triggers_they_name(db, tmp_path):
    memory = tmp_path / "kinds" / "docs" / "memory"
    for name in ("brief", *KINDS_TABLE):
        (memory / f"{name}.md").parent.mkdir(parents=True, exist_ok=True)
        (memory / f"{name}.md").write_text(f"# {name}\n\nThe {name} module of the kinds repo.\n", encoding="utf-8")
    (memory / "manifest.md").write_text(KINDS_MANIFEST, encoding="utf-8")
    repo = str(tmp_path / "kinds")
    call_command("import_memory", repo, "--corpus", "kinds", "--project", "kinds", stdout=io.StringIO())

    def run(*args):
        out, status = io.StringIO(), 0
        try:
            call_command("select", "--project", "kinds", "--query", "change the module", "--json", *args, stdout=out)
        except CommandError as error:
            status = error.returncode
        return status, json.loads(out.getvalue())["routing"]

    got: dict[str, dict[str, tuple[str, str]]] = {name: {} for name in KINDS_TABLE}
    for name in KINDS_TABLE:
        unit = name.replace("/", ".")
        for trigger, args in (
            ("task", ("--task-category", "implementation")),
            ("path", ("--task-category", "planning", "--path", "src/k.py")),
            ("explicit", ("--task-category", "planning", "--path", "docs/k.md", "--overlay", name)),
        ):
            status, routing = run(*args, "--strict-routing")
            d = next(d for d in routing["dispositions"] if d["unit"] == unit)
            got[name][trigger] = (d["disposition"], d["reason"])
            if d["reason"] == "ROUTE_INVALID":
                assert routing["completeness"] == "INVALID" and status == 2, (name, trigger)
            elif trigger != "task":  # the task trigger leaves the path areas unscoped: INCOMPLETE
                assert routing["completeness"] == "COMPLETE" and status == 0, (name, trigger, routing["problems"])
    assert got == KINDS_TABLE


# --- one row mapping: a corpus import and a memory re-import store a unit alike ----------------

# every column of the unit table but the row's own id and its corpus (the two imports make two)
UNIT_COLUMNS = [f.attname for f in MemoryUnit._meta.concrete_fields if f.attname not in ("id", "corpus_id")]


def unit_rows(corpus) -> dict[str, dict]:
    rows = {}
    for row in MemoryUnit.objects.filter(corpus=corpus).values(*UNIT_COLUMNS):
        row["embedding"] = None if row["embedding"] is None else [float(x) for x in row["embedding"]]
        rows[row["uid"]] = row
    return rows


def link_rows(corpus) -> list[tuple]:
    return sorted(
        UnitLink.objects.filter(source__corpus=corpus).values_list("source__uid", "target__uid", "kind", "position")
    )


# columns a re-import and a first import of the same tree agree on (the row's place and its
# transaction time differ by construction)
COMPARED = [
    c for c in UNIT_COLUMNS if c not in ("project_id", "position", "sequence", "created_sequence", "recorded_at")
]


def test_a_changed_unit_after_a_reimport_is_the_row_a_first_import_stores(db, tmp_path):
    repo = write_fixture(tmp_path)
    memory_import(repo, corpus="nightnotes-memory", project="nightnotes")
    decisions = repo / "docs" / "memory" / "decisions.md"
    decisions.write_text(
        decisions.read_text(encoding="utf-8").replace("human-readable local JSON", "plain local JSON"), encoding="utf-8"
    )
    again = memory_import(repo, corpus="nightnotes-memory", project="nightnotes")
    assert (again.added, again.removed, again.changed) == ((), (), ("mc-dec-20260926-00000002",))
    fresh = memory_import(repo, corpus="fresh-memory", project="fresh")

    after, first = unit_rows(again.corpus), unit_rows(fresh.corpus)
    assert sorted(after) == sorted(first)
    for uid in after:
        for column in COMPARED:
            if column == "embedding":  # embedded in other batches: equal to float32 rounding
                assert after[uid][column] == pytest.approx(first[uid][column], abs=1e-5), uid
            else:
                assert after[uid][column] == first[uid][column], (uid, column)
    assert link_rows(again.corpus) == link_rows(fresh.corpus) != []


def test_importing_the_same_memory_twice_changes_nothing(db, tmp_path):
    repo = write_fixture(tmp_path)
    first = memory_import(repo, corpus="nightnotes-memory", project="nightnotes")
    rows = unit_rows(first.corpus)
    second = memory_import(repo, corpus="nightnotes-memory", project="nightnotes")

    assert (first.version, second.version, second.corpus.pk) == (1, 1, first.corpus.pk)
    assert (second.added, second.removed, second.changed) == ((), (), ())
    assert unit_rows(second.corpus) == rows
    assert link_rows(second.corpus) == link_rows(first.corpus) != []
