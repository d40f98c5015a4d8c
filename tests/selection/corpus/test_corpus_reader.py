"""read_corpus accepts the format and rejects anything else, naming file, place and field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from selection.corpus import CorpusError, CorpusIssue, read_corpus
from selection.corpus.frames import check_frame
from selection.corpus.places import Place, Report
from selection.engine.gates import Gate
from selection.engine.types import DEFAULT_ADMISSION, OpenLoop


def rejected(path: Path) -> CorpusError:
    with pytest.raises(CorpusError) as caught:
        read_corpus(path)
    return caught.value


def the_issue(error: CorpusError) -> CorpusIssue:
    assert len(error.issues) == 1, str(error)
    return error.issues[0]


def assert_issue(error: CorpusError, file: str, location: str, field: str, fragment: str) -> None:
    """Exactly one issue, at this place, and its line in str(error) says all of it."""
    issue = the_issue(error)
    assert (issue.file, issue.location, issue.field) == (file, location, field), str(error)
    assert fragment in issue.message, str(error)
    line = str(error)
    assert line.startswith(f"{file} {location}")
    assert f'field "{field}"' in line
    assert fragment in line


def replaced(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


# --- what a valid corpus gives ---------------------------------------------------------------


def test_valid_corpus_reads_into_engine_types(make_corpus):
    data = read_corpus(make_corpus())

    assert data.name == "tiny"
    assert data.standpoint == datetime(2026, 9, 20, 12, tzinfo=UTC)
    alpha = data.project("alpha")
    frame = alpha.project_frame
    assert (frame.project, frame.version, frame.class_pull) == ("alpha", 1, 2)
    assert frame.work_types == (("release", ("note",)), ("review", ("rule", "note")))
    assert frame.gates.limits == (Gate("precision", max_drop=0.02), Gate("leakage", max=0.0))
    assert list(alpha.frame) == [
        "purpose",
        "objectives",
        "scope",
        "default_classes",
        "class_pull",
        "work_types",
        "open_loop_work_types",
        "gates",
    ]
    assert list(alpha.frame["work_types"]["review"]) == ["rule", "note"]
    assert alpha.extras == {"x-owner": "someone"}
    assert data.extras == {"x-source": {"repository": "example/tiny"}}

    units = data.units_by_id()
    assert units["a1"].valid_from == datetime(2026, 9, 1, 8, tzinfo=UTC)
    assert units["a1"].valid_from.utcoffset() == timedelta(hours=2)
    assert units["a1"].valid_to is None
    assert units["a2"].open_loop == OpenLoop("open", "todo")
    assert units["a2"].root is True and units["a2"].echo_of == "a1"
    assert data.units[0].extras == {"x-claim": "rule.one"}
    assert [record.line for record in data.units] == [1, 2, 3, 4]

    task = data.tasks[0]
    assert task.ledger == {"a1": "MUST", "a2": "SHOULD", "b1": "HARMFUL"}
    assert task.label("a0") == "DISTRACTOR"
    assert task.extras == {"x-note": "kept"}
    work_frame = task.work_frame()
    assert work_frame.work_type == "review"
    assert work_frame.cited("work_type") == ("s1", "s2")
    assert [signal.kind for signal in work_frame.signals] == ["user_message", "project_state"]

    proposal = data.proposals[0]
    assert (proposal.project, proposal.patch, proposal.extras) == (
        "alpha",
        {"class_pull": 4},
        {"x-from": "v2"},
    )


def test_optional_files_may_be_absent(make_corpus):
    data = read_corpus(make_corpus(tasks=None, proposals=None))
    assert data.tasks == () and data.proposals == ()


def test_a_task_may_have_no_user_message(make_corpus, samples):
    tasks = replaced(samples.tasks, "kind: user_message", "kind: failing_test")
    assert read_corpus(make_corpus(tasks=tasks)).tasks[0].signals[0].kind == "failing_test"


def test_blank_lines_in_units_are_skipped_but_counted(make_corpus, samples):
    rows = samples.units()
    error = rejected(
        make_corpus(
            units=[
                rows[0],
                "",
                rows[1],
                rows[2],
                rows[3],
                {"id": "z", "project": "alpha", "class": "rule"},
            ]
        )
    )
    assert the_issue(error).location == "line 6"


# --- unknown keys, at every level ------------------------------------------------------------

UNKNOWN_YAML_KEYS = [
    ("corpus.yaml", "name: tiny\n", "name: tiny\ncolour: red\n", "colour (line 2)", "colour"),
    (
        "corpus.yaml",
        "    name: Alpha\n",
        "    name: Alpha\n    owner: me\n",
        "projects[0].owner (line 7)",
        "owner",
    ),
    (
        "corpus.yaml",
        "      purpose: Check the reader.\n",
        "      purpose: Check the reader.\n      mood: calm\n",
        "projects[0].frame.mood (line 9)",
        "mood",
    ),
    (
        "corpus.yaml",
        "        primary: must_include_recall\n",
        "        primary: must_include_recall\n        strict: true\n",
        "projects[0].frame.gates.strict (line 19)",
        "strict",
    ),
    (
        "corpus.yaml",
        "{metric: precision, max_drop: 0.02}",
        "{metric: precision, max_drop: 0.02, hard: true}",
        "projects[0].frame.gates.limits[0].hard (line 21)",
        "hard",
    ),
    ("tasks.yaml", "tasks:\n", "version: 2\ntasks:\n", "version (line 1)", "version"),
    (
        "tasks.yaml",
        "    pair: p1\n",
        "    pair: p1\n    owner: me\n",
        "tasks[0].owner (line 6)",
        "owner",
    ),
    (
        "tasks.yaml",
        "content: Review the rules.}",
        "content: Review the rules., weight: 2}",
        "tasks[0].signals[0].weight (line 10)",
        "weight",
    ),
    (
        "tasks.yaml",
        "      objective: Decide which rules stay.\n",
        "      objective: Decide which rules stay.\n      mood: calm\n",
        "tasks[0].frame.mood (line 14)",
        "mood",
    ),
    (
        "tasks.yaml",
        "work_type: [s1, s2]}",
        "work_type: [s1, s2], query: [s1]}",
        "tasks[0].frame.cites.query (line 16)",
        "query",
    ),
    (
        "proposals.yaml",
        "    title: Widen the class pull\n",
        "    title: Widen the class pull\n    author: me\n",
        "proposals[0].author (line 5)",
        "author",
    ),
    (
        "proposals.yaml",
        "      class_pull: 4\n",
        "      class_pull: 4\n      colour: red\n",
        "proposals[0].patch.colour (line 8)",
        "colour",
    ),
]


@pytest.mark.parametrize(("file", "old", "new", "location", "field"), UNKNOWN_YAML_KEYS)
def test_unknown_yaml_key_is_refused(make_corpus, file, old, new, location, field, samples):
    texts = samples.texts()
    texts[file] = replaced(texts[file], old, new)
    error = rejected(
        make_corpus(
            corpus=texts["corpus.yaml"],
            tasks=texts["tasks.yaml"],
            proposals=texts["proposals.yaml"],
        )
    )
    assert_issue(error, file, location, field, f'unknown key "{field}"')


def test_unknown_unit_key_is_refused(make_corpus, samples):
    error = rejected(make_corpus(units=samples.with_unit(2, colour="red")))
    assert_issue(error, "units.jsonl", "line 3", "colour", 'unknown key "colour"')
    assert 'keys starting with "x-" are kept and ignored' in str(error)


def test_unknown_open_loop_key_is_refused(make_corpus, samples):
    error = rejected(
        make_corpus(
            units=samples.with_unit(1, open_loop={"status": "open", "kind": "todo", "due": "soon"})
        )
    )
    assert_issue(error, "units.jsonl", "line 2", "open_loop.due", 'unknown key "due"')


@pytest.mark.parametrize("key", ["importance", "priority", "weight"])
def test_a_unit_never_carries_an_importance(make_corpus, key, samples):
    error = rejected(make_corpus(units=samples.with_unit(0, **{key: 5})))
    assert_issue(error, "units.jsonl", "line 1", key, "never carries an importance")


def test_x_keys_are_kept_at_every_level(make_corpus, samples):
    units = samples.with_unit(1, open_loop={"status": "open", "kind": "todo", "x-id": "ol-1"})
    tasks = replaced(
        samples.tasks, "content: Review the rules.}", "content: Review the rules., x-raw: 1}"
    )
    tasks = replaced(tasks, "work_type: [s1, s2]}", "work_type: [s1, s2], x-by: hand}")
    tasks = replaced(
        tasks,
        "      constraints: [Be brief.]\n",
        "      constraints: [Be brief.]\n      x-origin: wf-1\n",
    )
    corpus = replaced(samples.corpus, "max_drop: 0.02}", "max_drop: 0.02, x-why: noise}")
    data = read_corpus(make_corpus(corpus=corpus, units=units, tasks=tasks))
    assert data.units[1].open_loop_extras == {"x-id": "ol-1"}
    assert data.tasks[0].signals[0].extras == {"x-raw": 1}
    assert data.tasks[0].frame.cites_extras == {"x-by": "hand"}
    assert data.tasks[0].frame.extras == {"x-origin": "wf-1"}
    assert data.project("alpha").frame["gates"]["limits"][0]["x-why"] == "noise"


# --- identifiers -----------------------------------------------------------------------------


def test_bad_unit_id(make_corpus, samples):
    error = rejected(make_corpus(units=samples.with_unit(3, id="B 1")))
    # the ledger still names b1, which no longer exists: that is its own issue
    assert {(issue.file, issue.location, issue.field) for issue in error.issues} == {
        ("units.jsonl", "line 4", "id"),
        ("tasks.yaml", "tasks[0].ledger.b1 (line 21)", "ledger"),
    }
    assert (
        'units.jsonl line 4, field "id": unit id "B 1" is not a valid name: use lower-case letters, digits, '
        '"-", "_" and ".", starting with a letter or digit (such as "design-review")' in str(error)
    )


def test_bad_class_name(make_corpus, samples):
    error = rejected(make_corpus(units=samples.with_unit(2, **{"class": "Rule"})))
    assert_issue(error, "units.jsonl", "line 3", "class", 'class name "Rule" is not a valid name: use lower-case')


@pytest.mark.parametrize(
    ("file", "old", "new", "location", "field", "fragment"),
    [
        (
            "tasks.yaml",
            "  - id: t1\n",
            "  - id: T1\n",
            "tasks[0].id (line 2)",
            "id",
            'task id "T1"',
        ),
        (
            "tasks.yaml",
            "      work_type: review\n",
            "      work_type: Review\n",
            "tasks[0].frame.work_type (line 14)",
            "work_type",
            'work type "Review"',
        ),
        ("tasks.yaml", "s2", "S2", "tasks[0].signals[1].id (line 11)", "id", 'signal id "S2"'),
        (
            "corpus.yaml",
            "name: tiny\n",
            "name: Tiny Corpus\n",
            "name (line 1)",
            "name",
            'corpus name "Tiny Corpus"',
        ),
        (
            "corpus.yaml",
            "        release: [note]\n",
            "        Release: [note]\n",
            "projects[0].frame.work_types.Release (line 15)",
            "Release",
            'work type "Release"',
        ),
        (
            "corpus.yaml",
            "default_classes: [rule]",
            "default_classes: [Rule]",
            "projects[0].frame.default_classes[0] (line 11)",
            "default_classes",
            'class name "Rule"',
        ),
        (
            "proposals.yaml",
            "  - id: wider-pull\n",
            "  - id: -wider\n",
            "proposals[0].id (line 2)",
            "id",
            'proposal id "-wider"',
        ),
    ],
)
def test_bad_identifier_in_yaml(make_corpus, file, old, new, location, field, fragment, samples):
    texts = samples.texts()
    texts[file] = replaced(texts[file], old, new).replace(old, new)
    error = rejected(
        make_corpus(
            corpus=texts["corpus.yaml"],
            tasks=texts["tasks.yaml"],
            proposals=texts["proposals.yaml"],
        )
    )
    assert_issue(error, file, location, field, fragment)


# --- links, cycles, duplicates ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("supersedes", ["a0", "mb-x"], "supersedes"),
        ("supports", ["mb-x"], "supports"),
        ("refutes", ["mb-x"], "refutes"),
        ("echo_of", "mb-x", "echo_of"),
    ],
)
def test_link_to_a_missing_unit(make_corpus, key, value, field, samples):
    error = rejected(make_corpus(units=samples.with_unit(1, **{key: value})))
    assert_issue(error, "units.jsonl", "line 2", field, 'unit "mb-x" does not exist')
    assert str(error) == f'units.jsonl line 2, field "{field}": unit "mb-x" does not exist'


def test_supersedes_cycle(make_corpus, samples):
    # a2 supersedes a0 already; a0 superseding a2 closes the loop
    error = rejected(make_corpus(units=samples.with_unit(2, supersedes=["a2"])))
    assert_issue(
        error,
        "units.jsonl",
        "line 2",
        "supersedes",
        "supersedes links form a cycle: a2 -> a0 -> a2",
    )


def test_a_unit_superseding_itself_is_a_cycle(make_corpus, samples):
    error = rejected(make_corpus(units=samples.with_unit(3, supersedes=["b1"])))
    assert_issue(error, "units.jsonl", "line 4", "supersedes", "cycle: b1 -> b1")


def test_echo_cycle(make_corpus, samples):
    # a2 restates a1; a1 restating a2 closes the loop
    error = rejected(make_corpus(units=samples.with_unit(0, echo_of="a2")))
    assert_issue(
        error, "units.jsonl", "line 1", "echo_of", "echo_of links form a cycle: a1 -> a2 -> a1"
    )


def test_duplicate_unit_id(make_corpus, samples):
    units = samples.units() + [{"id": "a0", "project": "beta", "class": "rule", "text": "Again."}]
    error = rejected(make_corpus(units=units))
    assert_issue(error, "units.jsonl", "line 5", "id", 'duplicate id "a0": already used on line 3')


def test_duplicate_key_in_a_json_object(make_corpus, samples):
    raw = '{"id": "z1", "project": "alpha", "class": "rule", "text": "One.", "text": "Two."}'
    error = rejected(make_corpus(units=[*samples.units(), raw]))
    assert_issue(error, "units.jsonl", "line 5", "text", 'key "text" appears more than once')


def test_duplicate_project_slug(make_corpus, samples):
    corpus = replaced(samples.corpus, "  - slug: beta\n", "  - slug: alpha\n").replace(
        "scope: [beta]", "scope: [alpha]"
    )
    error = rejected(
        make_corpus(
            corpus=corpus, units=[u for u in samples.units() if u["project"] == "alpha"], tasks=None
        )
    )
    assert_issue(
        error,
        "corpus.yaml",
        "projects[1].slug (line 24)",
        "slug",
        'project "alpha" is declared twice',
    )


def test_duplicate_task_id(make_corpus, samples):
    second = samples.tasks.split("\n", 1)[1]
    error = rejected(make_corpus(tasks=samples.tasks + second))
    assert_issue(
        error,
        "tasks.yaml",
        "tasks[1].id (line 23)",
        "id",
        'duplicate task id "t1": already used at tasks[0] (line 2)',
    )


def test_repeated_yaml_key(make_corpus, samples):
    tasks = replaced(samples.tasks, "    pair: p1\n", "    pair: p1\n    pair: p2\n")
    error = rejected(make_corpus(tasks=tasks))
    issue = the_issue(error)
    assert (issue.file, issue.location) == ("tasks.yaml", "line 6")
    assert 'repeats the key "pair"' in issue.message


# --- tasks -----------------------------------------------------------------------------------


def test_ledger_names_a_missing_unit(make_corpus, samples):
    tasks = replaced(samples.tasks, "      b1: HARMFUL\n", "      b9: HARMFUL\n")
    error = rejected(make_corpus(tasks=tasks))
    assert_issue(
        error,
        "tasks.yaml",
        "tasks[0].ledger.b9 (line 21)",
        "ledger",
        'unit "b9" does not exist in units.jsonl',
    )


def test_ledger_label_must_be_known(make_corpus, samples):
    tasks = replaced(samples.tasks, "      a2: SHOULD\n", "      a2: NICE\n")
    error = rejected(make_corpus(tasks=tasks))
    assert_issue(
        error,
        "tasks.yaml",
        "tasks[0].ledger.a2 (line 20)",
        "ledger",
        'label "NICE" is not one of: MUST, SHOULD',
    )


def test_cite_of_an_undeclared_signal(make_corpus, samples):
    tasks = replaced(samples.tasks, "cites: {objective: [s1]", "cites: {objective: [s9]")
    error = rejected(make_corpus(tasks=tasks))
    assert_issue(
        error,
        "tasks.yaml",
        "tasks[0].frame.cites.objective[0] (line 16)",
        "objective",
        'signal "s9" is not declared in this task\'s signals',
    )


def test_must_units_over_budget(make_corpus, samples):
    # a1 has 36 characters: ceil(36 / 4) = 9 estimated tokens
    tasks = replaced(samples.tasks, "budget_tokens: 100", "budget_tokens: 8")
    error = rejected(make_corpus(tasks=tasks))
    assert_issue(
        error,
        "tasks.yaml",
        "tasks[0].ledger (line 18)",
        "ledger",
        "its 1 MUST units need 9 estimated tokens, more than budget_tokens 8: "
        "the task could never be met",
    )


def test_must_units_exactly_at_budget_are_fine(make_corpus, samples):
    tasks = replaced(samples.tasks, "budget_tokens: 100", "budget_tokens: 9")
    assert read_corpus(make_corpus(tasks=tasks)).tasks[0].budget_tokens == 9


def test_budget_must_be_a_positive_integer(make_corpus, samples):
    tasks = replaced(samples.tasks, "budget_tokens: 100", "budget_tokens: lots")
    error = rejected(make_corpus(tasks=tasks))
    assert_issue(
        error,
        "tasks.yaml",
        "tasks[0].budget_tokens (line 8)",
        "budget_tokens",
        'expected an integer, got "lots"',
    )


def test_missing_required_task_key(make_corpus, samples):
    tasks = replaced(samples.tasks, "    query: Review the rules.\n", "")
    error = rejected(make_corpus(tasks=tasks))
    assert_issue(
        error, "tasks.yaml", "tasks[0] (line 2)", "query", 'required key "query" is missing'
    )


# --- times -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("2026-09-01T10:00:00", 'time "2026-09-01T10:00:00" has no zone'),
        ("2026-09-01", '"2026-09-01" is a date; a time needs a time of day and a zone'),
        ("last tuesday", '"last tuesday" is not an ISO 8601 time with a zone'),
        ("2026-02-30T10:00:00Z", '"2026-02-30T10:00:00Z" is not a valid time'),
        (1758000000, "expected an ISO 8601 time with a zone"),
    ],
)
def test_bad_unit_time(make_corpus, value, fragment, samples):
    error = rejected(make_corpus(units=samples.with_unit(0, created_at=value)))
    assert_issue(error, "units.jsonl", "line 1", "created_at", fragment)


def test_naive_time_in_yaml(make_corpus, samples):
    tasks = replaced(
        samples.tasks, "standpoint: 2026-09-20T12:00:00Z", "standpoint: 2026-09-20 12:00:00"
    )
    error = rejected(make_corpus(tasks=tasks))
    assert_issue(error, "tasks.yaml", "tasks[0].standpoint (line 7)", "standpoint", "has no zone")


def test_garbage_time_in_corpus_yaml(make_corpus, samples):
    corpus = replaced(samples.corpus, "standpoint: 2026-09-20T12:00:00Z", "standpoint: soon")
    error = rejected(make_corpus(corpus=corpus))
    assert_issue(
        error, "corpus.yaml", "standpoint (line 3)", "standpoint", '"soon" is not an ISO 8601 time'
    )


def test_validity_that_ends_before_it_starts(make_corpus, samples):
    error = rejected(make_corpus(units=samples.with_unit(0, valid_to="2026-08-01T00:00:00Z")))
    assert_issue(
        error, "units.jsonl", "line 1", "valid_to", "ends (2026-08-01T00:00:00Z) before it starts"
    )


# --- projects --------------------------------------------------------------------------------


def test_unit_of_an_undeclared_project(make_corpus, samples):
    error = rejected(make_corpus(units=samples.with_unit(2, project="gamma")))
    assert_issue(
        error, "units.jsonl", "line 3", "project", 'project "gamma" is not declared in corpus.yaml'
    )


def test_task_of_an_undeclared_project(make_corpus, samples):
    tasks = replaced(samples.tasks, "    project: alpha\n", "    project: gamma\n")
    error = rejected(make_corpus(tasks=tasks))
    assert_issue(
        error,
        "tasks.yaml",
        "tasks[0].project (line 4)",
        "project",
        'project "gamma" is not declared',
    )


def test_proposal_of_an_undeclared_project(make_corpus, samples):
    proposals = replaced(samples.proposals, "    project: alpha\n", "    project: gamma\n")
    error = rejected(make_corpus(proposals=proposals))
    assert_issue(
        error,
        "proposals.yaml",
        "proposals[0].project (line 3)",
        "project",
        'project "gamma" is not declared',
    )


def test_scope_names_an_undeclared_project(make_corpus, samples):
    corpus = replaced(samples.corpus, "scope: [alpha]", "scope: [alpha, gamma]")
    error = rejected(make_corpus(corpus=corpus))
    assert_issue(
        error,
        "corpus.yaml",
        "projects[0].frame.scope[1] (line 10)",
        "scope",
        'project "gamma" is not declared',
    )


def test_scope_may_name_a_project_declared_later(make_corpus, samples):
    corpus = replaced(samples.corpus, "scope: [alpha]", "scope: [alpha, beta]")
    assert read_corpus(make_corpus(corpus=corpus)).project("alpha").project_frame.scope == (
        "alpha",
        "beta",
    )


# --- enums -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("open_loop", "field", "fragment"),
    [
        (
            {"status": "pending", "kind": "todo"},
            "open_loop.status",
            '"pending" is not one of: open, closed',
        ),
        (
            {"status": "open", "kind": "wish"},
            "open_loop.kind",
            '"wish" is not one of: todo, question, expectation',
        ),
        ({"status": "open"}, "open_loop.kind", 'required key "kind" is missing'),
    ],
)
def test_bad_open_loop(make_corpus, open_loop, field, fragment, samples):
    error = rejected(make_corpus(units=samples.with_unit(1, open_loop=open_loop)))
    assert_issue(error, "units.jsonl", "line 2", field, fragment)


def test_bad_signal_kind(make_corpus, samples):
    tasks = replaced(samples.tasks, "kind: project_state", "kind: rumour")
    error = rejected(make_corpus(tasks=tasks))
    assert_issue(
        error,
        "tasks.yaml",
        "tasks[0].signals[1].kind (line 11)",
        "kind",
        '"rumour" is not one of: user_message',
    )


@pytest.mark.parametrize(
    ("old", "new", "location", "field"),
    [
        (
            "{metric: precision,",
            "{metric: recall,",
            "projects[0].frame.gates.limits[0].metric (line 21)",
            "metric",
        ),
        (
            "primary: must_include_recall",
            "primary: accuracy",
            "projects[0].frame.gates.primary (line 18)",
            "primary",
        ),
    ],
)
def test_gates_name_only_known_metrics(make_corpus, old, new, location, field, samples):
    error = rejected(make_corpus(corpus=replaced(samples.corpus, old, new)))
    assert_issue(
        error,
        "corpus.yaml",
        location,
        field,
        "is not one of: must_include_recall, precision, leakage",
    )


def test_gate_limit_needs_a_bound(make_corpus, samples):
    error = rejected(
        make_corpus(
            corpus=replaced(samples.corpus, "{metric: leakage, max: 0.0}", "{metric: leakage}")
        )
    )
    assert_issue(
        error,
        "corpus.yaml",
        "projects[0].frame.gates.limits[1] (line 22)",
        "metric",
        "a limit needs a bound",
    )


def test_root_must_be_a_boolean(make_corpus, samples):
    error = rejected(make_corpus(units=samples.with_unit(1, root="yes")))
    assert_issue(error, "units.jsonl", "line 2", "root", 'expected true or false, got "yes"')


# --- proposals -------------------------------------------------------------------------------


def test_patch_must_be_a_mapping(make_corpus, samples):
    proposals = replaced(
        samples.proposals, "    patch:\n      class_pull: 4\n", "    patch: [class_pull, 4]\n"
    )
    error = rejected(make_corpus(proposals=proposals))
    assert_issue(
        error, "proposals.yaml", "proposals[0].patch (line 6)", "patch", "must be a mapping"
    )


def test_patch_must_leave_a_valid_frame(make_corpus, samples):
    proposals = replaced(
        samples.proposals, "      class_pull: 4\n", "      class_pull: 4\n      scope: [gamma]\n"
    )
    error = rejected(make_corpus(proposals=proposals))
    assert_issue(
        error,
        "proposals.yaml",
        "proposals[0].patch.scope[0] (line 8)",
        "scope",
        'project "gamma" is not declared',
    )


def test_patch_may_delete_a_key_with_null(make_corpus, samples):
    proposals = replaced(samples.proposals, "      class_pull: 4\n", "      gates: null\n")
    assert read_corpus(make_corpus(proposals=proposals)).proposals[0].patch == {"gates": None}


# --- unreadable files ------------------------------------------------------------------------


def test_malformed_json_line(make_corpus, samples):
    error = rejected(
        make_corpus(
            units=[*samples.units()[:2], '{"id": "a0", "project": "alpha",', *samples.units()[3:]]
        )
    )
    # a0 is lost with its line, so a2's supersedes and b1's refutes now point nowhere; the
    # malformed line is reported first with its line number and column
    first = error.issues[0]
    assert (first.file, first.location, first.field) == ("units.jsonl", "line 3", "")
    assert "is not valid JSON" in first.message and "column" in first.message
    assert str(error).startswith("units.jsonl line 3: is not valid JSON")


def test_a_json_line_must_be_an_object(make_corpus, samples):
    error = rejected(make_corpus(units=[*samples.units(), '["a", "list"]']))
    assert str(the_issue(error)) == "units.jsonl line 5: must hold one JSON object"


def test_malformed_yaml(make_corpus, samples):
    tasks = replaced(samples.tasks, "    pair: p1\n", "    pair: [p1\n")
    error = rejected(make_corpus(tasks=tasks))
    issue = the_issue(error)
    assert issue.file == "tasks.yaml" and issue.location.startswith("line ")
    assert "is not valid YAML" in issue.message


def test_missing_required_files(tmp_path):
    (tmp_path / "c").mkdir()
    error = rejected(tmp_path / "c")
    assert [issue.file for issue in error.issues] == ["corpus.yaml", "units.jsonl"]
    assert all("is missing" in issue.message for issue in error.issues)


def test_every_issue_is_reported_in_one_pass(make_corpus, samples):
    units = samples.with_unit(0, created_at="yesterday")
    units[3]["project"] = "gamma"
    units.append('{"id": ')
    tasks = replaced(samples.tasks, "kind: project_state", "kind: rumour")
    corpus = replaced(samples.corpus, "class_pull: 2", "class_pull: two")
    error = rejected(make_corpus(corpus=corpus, units=units, tasks=tasks))
    places = [(issue.file, issue.location) for issue in error.issues]
    assert places == [
        ("corpus.yaml", "projects[0].frame.class_pull (line 12)"),
        ("units.jsonl", "line 5"),
        ("units.jsonl", "line 1"),
        ("units.jsonl", "line 4"),
        ("tasks.yaml", "tasks[0].signals[1].kind (line 11)"),
    ]
    assert len(str(error).splitlines()) == 5


# --- what the store could not hold -----------------------------------------------------------


def test_a_link_listed_twice(make_corpus, samples):
    error = rejected(make_corpus(units=samples.with_unit(1, supports=["a1", "a1"])))
    assert_issue(error, "units.jsonl", "line 2", "supports", 'unit "a1" is listed twice')


@pytest.mark.parametrize("key", ["supports", "refutes"])
def test_a_unit_cannot_support_or_refute_itself(make_corpus, samples, key):
    error = rejected(make_corpus(units=samples.with_unit(0, **{key: ["a1"]})))
    assert_issue(error, "units.jsonl", "line 1", key, f"a unit cannot {key[:-1]} itself")


def test_empty_subject(make_corpus, samples):
    error = rejected(make_corpus(units=samples.with_unit(1, subject="  ")))
    assert_issue(error, "units.jsonl", "line 2", "subject", "must not be empty")


def test_cites_keep_the_format_order_whatever_the_file_order(make_corpus, samples):
    tasks = replaced(
        samples.tasks,
        "cites: {objective: [s1], work_type: [s1, s2]}",
        "cites: {work_type: [s1, s2], objective: [s1]}",
    )
    cites = read_corpus(make_corpus(tasks=tasks)).tasks[0].frame.cites
    assert cites == (("objective", ("s1",)), ("work_type", ("s1", "s2")))


# --- establishment policy: calibration and the query-only hedge ---------------------------------


def test_establishment_calibration_and_hedge_are_frame_fields(make_corpus, samples):
    texts = samples.texts()
    corpus = replaced(
        texts["corpus.yaml"],
        "      class_pull: 2\n",
        "      class_pull: 2\n      establishment:\n        builder: similarity\n"
        "        calibration: none\n        min_calibrated: 5\n        query_head: 0.25\n",
    )
    policy = read_corpus(make_corpus(corpus=corpus)).project("alpha").project_frame.establishment
    assert (policy.builder, policy.calibration, policy.min_calibrated, policy.query_head) == (
        "similarity", "none", 5, 0.25
    )


@pytest.mark.parametrize(
    ("entry", "field", "fragment"),
    [
        ("calibration: sometimes", "calibration", "sometimes"),
        ("query_head: 1.5", "query_head", "[0, 1]"),
        ("min_calibrated: 2.5", "min_calibrated", "whole number"),
    ],
)
def test_bad_establishment_policy_is_refused(make_corpus, samples, entry, field, fragment):
    texts = samples.texts()
    corpus = replaced(
        texts["corpus.yaml"], "      class_pull: 2\n", f"      class_pull: 2\n      establishment:\n        {entry}\n"
    )
    error = rejected(make_corpus(corpus=corpus))
    issue = the_issue(error)
    assert (issue.file, issue.field) == ("corpus.yaml", field), str(error)
    assert fragment in issue.message, str(error)


# --- the admission stop rule's tier cap and unlisted floor ------------------------------------


def test_admission_reads_the_tier_cap_and_the_unlisted_floor(make_corpus, samples):
    texts = samples.texts()
    policy = "      admission: {rule: relative, floor: 0.6, unlisted: 2, tier_cap: 5, unlisted_floor: 0.75}\n"
    corpus = replaced(texts["corpus.yaml"], "      class_pull: 2\n", "      class_pull: 2\n" + policy)
    data = read_corpus(make_corpus(corpus=corpus, tasks=texts["tasks.yaml"], proposals=texts["proposals.yaml"]))
    report = Report()
    frame = check_frame(
        data.project("alpha").frame, Place("frame"), report, project="alpha", declared={"alpha", "beta"}
    )
    assert not report.issues and (frame.admission.tier_cap, frame.admission.unlisted_floor) == (5, 0.75)


@pytest.mark.parametrize(
    ("declared", "rule", "origin"),
    [
        (None, "unlisted", "engine default"),
        ("{rule: none}", "none", "frame"),
        ("{rule: unlisted, unlisted_floor: 0.8}", "unlisted", "frame"),
    ],
)
def test_a_frame_without_admission_gets_the_engine_default_and_rule_none_opts_out(
    make_corpus, samples, declared, rule, origin
):
    texts = samples.texts()
    corpus = texts["corpus.yaml"]
    if declared is not None:
        corpus = replaced(corpus, "      class_pull: 2\n", f"      class_pull: 2\n      admission: {declared}\n")
    data = read_corpus(make_corpus(corpus=corpus, tasks=texts["tasks.yaml"], proposals=texts["proposals.yaml"]))
    report = Report()
    frame = check_frame(
        data.project("alpha").frame, Place("frame"), report, project="alpha", declared={"alpha", "beta"}
    )
    assert not report.issues and (frame.admission.rule, frame.admission.origin) == (rule, origin)
    if declared is None:
        assert frame.admission == DEFAULT_ADMISSION


@pytest.mark.parametrize(
    ("value", "field", "fragment"),
    [("tier_cap: 0", "tier_cap", "at least 1"), ("unlisted_floor: 1.5", "unlisted_floor", "between 0 and 1")],
)
def test_a_bad_tier_cap_or_unlisted_floor_is_refused(make_corpus, samples, value, field, fragment):
    texts = samples.texts()
    policy = f"      admission: {{rule: relative, {value}}}\n"
    corpus = replaced(texts["corpus.yaml"], "      class_pull: 2\n", "      class_pull: 2\n" + policy)
    error = rejected(make_corpus(corpus=corpus, tasks=texts["tasks.yaml"], proposals=texts["proposals.yaml"]))
    issue = the_issue(error)
    assert (issue.file, issue.field) == ("corpus.yaml", field) and fragment in issue.message, str(error)
