"""Hostile inputs on the real database: refused imports write no row; filters never give a 500;
CSV exports never hand a spreadsheet a formula."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selection.corpus import CorpusError
from selection.memory import embeddings
from selection.memory.importing import corpus_import
from tests.selection.test_import import TASKS_YAML, UNITS, row_counts, write_corpus_dir


@pytest.fixture
def nothing_embedded(monkeypatch):
    asked: list = []
    monkeypatch.setattr(embeddings, "embed_texts", lambda texts, **kw: asked.append(texts))
    return asked


def units_with(index: int, key: str, value) -> list:
    units = json.loads(json.dumps(UNITS))
    units[index][key] = value
    return units


HOSTILE = {
    "nul in a text": ("units", lambda: units_with(0, "text", "a\u0000b")),
    "lone surrogate in a title": ("units", lambda: units_with(1, "title", "x\udc00")),
    "huge integer in an extension": ("units", lambda: units_with(1, "x-n", 2**64)),
    "budget past a column": ("tasks", lambda: TASKS_YAML.replace("budget_tokens: ", "budget_tokens: 9999999999", 1)),
    "alias bomb": (
        "tasks",
        lambda: (
            TASKS_YAML
            + "x-a: &a [l, l, l, l, l, l, l, l, l, l]\n"
            + "".join(f"x-{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh", strict=True))
        ),
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_corpus_is_refused_with_zero_rows(tmp_path, nothing_embedded, case):
    part, make = HOSTILE[case]
    kwargs = {part: make()}
    if part == "units":
        kwargs["units"] = [json.dumps(u, ensure_ascii=True) for u in kwargs["units"]]
    path = write_corpus_dir(tmp_path / "hostile", **kwargs)
    with pytest.raises(CorpusError) as caught:
        corpus_import(path)
    assert row_counts() == dict.fromkeys(row_counts(), 0)
    assert nothing_embedded == []
    assert all(issue.file and issue.message for issue in caught.value.issues)


HOSTILE_VALUES = st.one_of(
    st.sampled_from([float("nan"), float("inf"), 2**63, -(2**70), "\u0000", "a\ud83d", "\udfff z"]),
    st.lists(st.sampled_from(["\u0000", float("-inf"), 10**30]), min_size=1, max_size=3),
    st.recursive(st.just([]), lambda inner: st.lists(inner, min_size=1, max_size=1), min_leaves=40),
)


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    index=st.integers(0, len(UNITS) - 1),
    key=st.sampled_from(["text", "title", "x-note", "subject"]),
    value=HOSTILE_VALUES,
)
def test_any_unstorable_unit_value_is_refused_with_zero_rows(tmp_path_factory, nothing_embedded, index, key, value):
    directory = tmp_path_factory.mktemp("hostile")
    # ensure_ascii writes a lone surrogate as its escape; NaN and Infinity as JavaScript does
    units = [json.dumps(u, ensure_ascii=True) for u in units_with(index, key, value)]
    with pytest.raises(CorpusError):
        corpus_import(write_corpus_dir(directory, units=units))
    assert row_counts() == dict.fromkeys(row_counts(), 0)
    assert nothing_embedded == []


# --- filters: a 400 or an empty page, never a 500 -----------------------------------------------


@pytest.fixture
def someone(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("someone"))
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query, status",
    [
        ("until=9999-12-31", 400),
        ("since=0001-01-01", 400),
        ("since=2026-01-01&until=2026-12-31", 200),
        ("frame_version=99999999999999999999", 400),
        ("frame_version=-1", 400),
        ("since=not-a-date", 200),
    ],
)
def test_trace_history_filters_out_of_range_are_a_400(someone, query, status):
    for name in ("trace-list",):
        assert someone.get(f"{reverse(name)}?{query}").status_code == status
    export = someone.get(f"{reverse('trace-search-export', args=['csv'])}?{query}")
    assert export.status_code == status


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["since=9999-12-31", "until=0001-01-01", "since=9999-12-31&until=9999-12-31"])
def test_audit_log_dates_at_the_edges_give_an_empty_page(someone, query):
    response = someone.get(f"{reverse('audit-log')}?{query}")
    assert response.status_code in (200, 400)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "/traces/diff/?a=99999999999999999999999&b=1",
        "/traces/99999999999999999999999/",
        "/proposals/99999999999999999999999/",
        "/backtests/99999999999999999999999/",
    ],
)
def test_ids_no_row_can_have_are_a_404(someone, url):
    assert someone.get(url).status_code == 404


# --- CSV exports --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_csv_exports_neutralise_cells_that_would_start_a_formula(tmp_path, django_user_model, client):
    from authority.models import RoleGrant
    from selection.memory import store
    from selection.serving import selections as services
    from tests.selection.test_traces import Lab

    lab = Lab(tmp_path)
    user = django_user_model.objects.create_user("auditor")
    RoleGrant.objects.create(user=user, project=lab.project, role="auditor")
    queries = ['=HYPERLINK("http://x")', "+1+2", "-3", "@SUM(A1)", "plain notes review"]
    for query in queries:
        trace = services.run_selection(
            project=lab.project,
            query=query,
            work_frame=store.work_frame_for_task(lab.task),
            budget_tokens=130,
            condition="C6",
            standpoint=lab.task.standpoint,
            source="select",
        ).trace
    client.force_login(user)
    body = b"".join(client.get(reverse("trace-search-export", args=["csv"])).streaming_content)
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert sorted(r["query"] for r in rows) == sorted(
        ['\'=HYPERLINK("http://x")', "'+1+2", "'-3", "'@SUM(A1)", "plain notes review"]
    )
    # numbers stay numbers, a negative one included
    assert all(r["budget_tokens"] == "130" for r in rows)
    per_trace = client.get(reverse("trace-export", args=[trace.pk, "csv"])).content.decode()
    for row in csv.reader(io.StringIO(per_trace)):
        assert not [c for c in row if c[:1] in ("=", "+", "@")], row


def test_csv_row_quotes_formula_starts_only():
    from selection.traces.csv_cells import csv_row

    assert csv_row(["=1", "+a", "-b", "@c", "\tx", "ok", -1.5, 3, None]) == [
        "'=1",
        "'+a",
        "'-b",
        "'@c",
        "'\tx",
        "ok",
        -1.5,
        3,
        None,
    ]
