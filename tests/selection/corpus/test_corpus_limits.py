"""Hostile corpora end in an issue list, never a crash, a hang or a value the database refuses.

Each case names what docs/corpus-format.md ("Limits") promises; the property tests at the end
corrupt the valid sample corpus at random and hold every outcome to the same promise.
"""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selection.corpus import CorpusError, limits, read_corpus
from tests.selection.corpus.conftest import CORPUS_YAML, PROPOSALS_YAML, TASKS_YAML, base_units

FILES = {"corpus.yaml", "units.jsonl", "tasks.yaml", "proposals.yaml"}


def refused(path) -> CorpusError:
    with pytest.raises(CorpusError) as caught:
        read_corpus(path)
    error = caught.value
    for issue in error.issues:
        assert issue.file in FILES, str(error)
        str(issue).encode("utf-8")  # printable: no lone surrogate reaches a terminal or a page
    return error


def messages(error: CorpusError) -> str:
    return "\n".join(str(issue) for issue in error.issues)


ALIAS_BOMB = """\
x-a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]
x-b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
x-c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
x-d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
x-e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
x-f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
x-g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
x-h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
x-i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def test_an_alias_bomb_is_refused_quickly(make_corpus):
    started = time.monotonic()
    error = refused(make_corpus(tasks=TASKS_YAML + ALIAS_BOMB))
    assert time.monotonic() - started < 5
    assert "tasks.yaml: expands to more than 200000 values" in messages(error)
    assert "alias bomb" in messages(error)


def test_nesting_past_the_depth_limit_is_refused(make_corpus):
    deep = "x-deep: " + "[" * 5000 + "]" * 5000 + "\n"
    error = refused(make_corpus(corpus=CORPUS_YAML + deep))
    assert f"nests deeper than {limits.MAX_DEPTH} levels" in messages(error)
    assert error.issues[0].file == "corpus.yaml"


def test_nesting_through_aliases_is_refused(make_corpus):
    layers = ["x-l0: &l0 [end]"]
    for n in range(1, 20):
        layers.append(f"x-l{n}: &l{n} [[[*l{n - 1}]]]")
    error = refused(make_corpus(corpus=CORPUS_YAML + "\n".join(layers) + "\n"))
    assert f"nests deeper than {limits.MAX_DEPTH} levels" in messages(error)


def test_a_deep_json_line_is_refused_with_its_line(make_corpus):
    units = base_units()
    deep = json.dumps(units[0])[:-1] + ', "x-deep": ' + "[" * 100000 + "]" * 100000 + "}"
    error = refused(make_corpus(units=[deep, *units[1:]]))
    issue = error.issues[0]
    assert (issue.file, issue.location) == ("units.jsonl", "line 1")
    assert "nests deeper than" in issue.message


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("a\u0000b", "NUL character"),
        ("a\ud800b", "lone surrogate (\\ud800)"),
    ],
)
def test_nul_and_lone_surrogates_in_units_are_refused(make_corpus, text, fragment):
    units = base_units()
    units[2]["text"] = text
    error = refused(make_corpus(units=units))
    issue = error.issues[0]
    assert (issue.file, issue.location, issue.field) == ("units.jsonl", "line 3", "text")
    assert fragment in issue.message
    # the unit is not reported missing on top: links to "a0" stay quiet
    assert len(error.issues) == 1, messages(error)


def test_a_nul_escaped_in_yaml_is_refused_with_its_path(make_corpus):
    tasks = TASKS_YAML.replace("query: Review the rules.", 'query: "Review\\0 the rules."')
    error = refused(make_corpus(tasks=tasks))
    issue = error.issues[0]
    assert (issue.file, issue.location, issue.field) == ("tasks.yaml", "tasks[0].query (line 6)", "query")
    assert "NUL character" in issue.message


def test_a_raw_nul_byte_in_yaml_is_refused(make_corpus):
    error = refused(make_corpus(corpus=CORPUS_YAML.replace("Two projects", "Two\x00projects")))
    assert "corpus.yaml" in messages(error) and "not valid YAML" in messages(error)


@pytest.mark.parametrize(
    "old, new, field, fragment",
    [
        ("class_pull: 2", "class_pull: 99999999999", "class_pull", "must be at most 2147483647"),
        ("class_pull: 2", "class_pull: " + "9" * 5000, "class_pull", "cannot be read"),
        ("min_improvement: 0.0", "min_improvement: .inf", "min_improvement", "not a finite number"),
        ("min_improvement: 0.0", "min_improvement: .nan", "min_improvement", "not a finite number"),
        ("max_drop: 0.02}", "max_drop: 1.0e+300}", "max_drop", "out of range"),
        ("standpoint: 2026-09-20T12:00:00Z", "standpoint: 9999-12-31T23:00:00-05:00", "standpoint", "out of range"),
    ],
)
def test_numbers_and_times_out_of_range_are_refused(make_corpus, old, new, field, fragment):
    error = refused(make_corpus(corpus=CORPUS_YAML.replace(old, new, 1)))
    assert any(
        issue.file == "corpus.yaml" and (issue.field == field or not issue.field) and fragment in issue.message
        for issue in error.issues
    ), messages(error)


def test_out_of_range_numbers_in_units_and_tasks_are_refused(make_corpus):
    units = base_units()
    units[1]["x-big"] = 2**70
    tasks = TASKS_YAML.replace("budget_tokens: 100", "budget_tokens: 3000000000")
    error = refused(make_corpus(units=units, tasks=tasks))
    text = messages(error)
    assert 'units.jsonl line 2, field "x-big"' in text and "out of range" in text
    assert 'tasks.yaml tasks[0].budget_tokens (line 8), field "budget_tokens"' in text
    units[1]["x-big"] = float("nan")
    assert "NaN is not a JSON number" in messages(refused(make_corpus(units=units)))


def test_files_and_lines_past_their_size_limits_are_refused(make_corpus, monkeypatch):
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 400)
    units = base_units()
    units[3]["text"] = "long " * 100
    error = refused(make_corpus(units=units))
    assert messages(error).startswith("units.jsonl line 4: is ")
    assert "a line may hold at most 400 bytes" in messages(error)

    monkeypatch.setattr(limits, "MAX_YAML_BYTES", 1000)
    error = refused(make_corpus(tasks=TASKS_YAML + "x-pad: " + "p" * 1000 + "\n"))
    assert "tasks.yaml: is " in messages(error) and "at most 1000 bytes" in messages(error)


def test_the_documented_limits_match_the_code():
    doc = (__import__("pathlib").Path(__file__).resolve().parents[3] / "docs" / "corpus-format.md").read_text()
    for value in (
        limits.MAX_YAML_BYTES,
        limits.MAX_JSONL_BYTES,
        limits.MAX_LINE_BYTES,
        limits.MAX_DEPTH,
        limits.MAX_YAML_VALUES,
        limits.MAX_INTEGER,
        limits.MAX_PATCH_BYTES,
    ):
        assert f"`{value}`" in doc, value


# --- property: random corruption of the valid corpus -------------------------------------------

HOSTILE_SCALARS = st.one_of(
    st.sampled_from(
        [
            float("nan"),
            float("inf"),
            -float("inf"),
            2**63,
            -(2**80),
            10**400,
            "\u0000",
            "x\ud800",
            "\udfff",
            "=HYPERLINK(1)",
            "",
            "Z" * 300,
        ]
    ),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.booleans(),
    st.none(),
)
HOSTILE_VALUES = st.recursive(
    HOSTILE_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
YAML_NOISE = st.sampled_from(
    [
        "\x00",
        "\t",
        "&a [*a]",
        "*nope",
        "!!python/object:os.system ls",
        "[" * 200,
        "{",
        ": :",
        "- - -",
        "'",
        '"\\ud800"',
        '"\\0"',
        ".nan",
        "1e999",
        "9" * 5000,
        "<<: *x",
        "? [a]\n: b",
        "\ufeff",
        "\udc80",
    ]
) | st.text(max_size=12)


def _jsonl(units) -> str:
    lines = []
    for unit in units:
        try:
            lines.append(json.dumps(unit, ensure_ascii=True))
        except ValueError:
            lines.append(str(unit))
    return "".join(line + "\n" for line in lines)


@st.composite
def corrupted_corpus(draw):
    """The valid sample corpus with one to three random corruptions, file by file."""
    texts = {
        "corpus.yaml": CORPUS_YAML,
        "tasks.yaml": TASKS_YAML,
        "proposals.yaml": PROPOSALS_YAML,
    }
    units = base_units()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["yaml-insert", "yaml-truncate", "unit-value", "unit-key"]))
        if kind in ("yaml-insert", "yaml-truncate"):
            name = draw(st.sampled_from(sorted(texts)))
            text = texts[name]
            at = draw(st.integers(0, len(text)))
            texts[name] = text[:at] + draw(YAML_NOISE) + text[at:] if kind == "yaml-insert" else text[:at]
        else:
            index = draw(st.integers(0, len(units) - 1))
            keys = sorted(units[index]) + ["x-extra", "supersedes", "open_loop"]
            key = draw(st.sampled_from(keys)) if kind == "unit-value" else draw(st.text(max_size=8))
            units[index][key] = draw(HOSTILE_VALUES)
    return texts, units


def _storable(value) -> None:
    """What a database column or JSONB can hold: no NUL, no surrogate, finite bounded numbers."""
    assert not list(limits.value_problems(value)), value


def _write(directory, texts, units) -> None:
    directory.mkdir(exist_ok=True)
    for name, text in texts.items():
        (directory / name).write_bytes(text.encode("utf-8", "surrogatepass"))
    (directory / "units.jsonl").write_bytes(_jsonl(units).encode("utf-8", "surrogatepass"))


CASES = {"read": 0, "refused": 0}


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=corrupted_corpus())
def test_any_corruption_ends_in_a_clear_error_or_a_storable_corpus(tmp_path, case):
    texts, units = case
    directory = tmp_path / "corrupt"
    _write(directory, texts, units)
    CASES["read"] += 1
    try:
        data = read_corpus(directory)
    except CorpusError as error:
        CASES["refused"] += 1
        assert error.issues
        for issue in error.issues:
            assert issue.file in FILES
            str(issue).encode("utf-8")
        return
    for record in data.units:
        _storable([record.unit.id, record.unit.text, record.unit.title or "", record.extras])
    for spec in data.projects:
        _storable(spec.frame)
        _storable(spec.extras)
    for task in data.tasks:
        _storable([task.query, task.id])
    for proposal in data.proposals:
        _storable(proposal.patch)
    _storable([data.extras, data.tasks_extras, data.proposals_extras])
