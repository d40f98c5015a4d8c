"""The trace explorer on the real PostgreSQL: what an auditor, a reviewer or a lead sees and may do.

Traces come from a tiny corpus imported through corpus_import (the packaged embedding model) and
selected through selections.run_selection, BM25-only where exact outcomes matter.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from django.urls import reverse

LAB_CORPUS = """\
name: tlab
description: A small corpus for the trace explorer tests.
standpoint: 2026-09-20T12:00:00Z
projects:
  - slug: tlab
    name: Trace lab
    frame:
      purpose: Exercise the trace explorer.
      scope: [tlab]
      default_classes: [rule, result]
      class_pull: 1
      work_types:
        review: [rule, result, note]
      gates:
        primary: must_include_recall
        min_improvement: 0.0
  - slug: tother
    name: Other
    frame:
      scope: [tother]
"""


def _unit(uid, cls, text, project="tlab", **extra):
    row = {
        "id": uid,
        "project": project,
        "class": cls,
        "title": uid.upper(),
        "text": text,
        "created_at": "2026-09-01T10:00:00Z",
    }
    row.update(extra)
    return row


LONG_RULE = "Long budget rule for reviews of ranking: " + " ".join(
    f"clause {i} says the budget must be spent on evidence that the review needs, never on repetition;"
    for i in range(3)
)
LAB_UNITS = [
    _unit(
        "r0",
        "rule",
        "Old ranking budget rule: rank by recency and spend the whole budget on the newest notes.",
        valid_to="2026-06-01T00:00:00Z",
    ),
    _unit(
        "r1",
        "rule",
        "Ranking budget rule: rank candidates by query relevance inside each class bucket and "
        "admit whole items while the budget lasts.",
        supersedes=["r0"],
    ),
    _unit("r2", "rule", "Review rule: every ranking change is reviewed against the baseline first."),
    _unit("rlong", "rule", LONG_RULE),
    _unit("res1", "result", "Result: the ranking change lifted recall at the same budget in review."),
    _unit("res2", "result", "Result: budget sweeps show recall saturates near fifteen hundred tokens."),
    _unit("n1", "note", "Note: the ranking budget rule restated for the planning meeting.", echo_of="r1"),
    _unit("n2", "note", "Note: reviewers asked whether the budget should grow."),
    _unit("n3", "note", "Note: ranking review scheduled for Tuesday."),
    _unit("n4", "note", "Note: budget questions go to the review channel."),
    _unit("n5", "note", "Note: the ranking dashboard shows budget use per review."),
    _unit("n6", "note", "Note: rule review backlog is short this week."),
    _unit("n7", "note", "Note: ranking and budget were discussed at length."),
    _unit("n8", "note", "Note: another ranking budget review note."),
    _unit("p1", "prose", "The chapter prose explains why the pipeline exists at all, for readers."),
    _unit(
        "o1",
        "rule",
        "Other project ranking budget rule: always spend the whole budget on ranking review notes.",
        project="tother",
    ),
]

LAB_TASKS = """\
tasks:
  - id: t-review
    project: tlab
    query: How should the ranking budget rule be reviewed?
    standpoint: 2026-09-20T12:00:00Z
    budget_tokens: 140
    signals:
      - {id: s1, kind: user_message, content: Review the ranking budget rule before the release.}
      - {id: s2, kind: failing_test, content: test_budget_rule fails on the review set.}
    frame:
      objective: Decide whether the ranking budget rule stays.
      work_type: review
      constraints: [Keep it short.]
      cites: {objective: [s1], work_type: [s1, s2]}
    ledger:
      r1: MUST
      rlong: MUST
      p1: MUST
      res1: SHOULD
      o1: HARMFUL
"""

LAB_PROPOSALS = """\
proposals:
  - id: notes-first
    project: tlab
    title: Notes first in review
    patch:
      work_types:
        review: [note, rule, result]
"""


def write_lab(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "corpus.yaml").write_text(LAB_CORPUS, encoding="utf-8")
    (directory / "units.jsonl").write_text("".join(json.dumps(u) + "\n" for u in LAB_UNITS), encoding="utf-8")
    (directory / "tasks.yaml").write_text(LAB_TASKS, encoding="utf-8")
    (directory / "proposals.yaml").write_text(LAB_PROPOSALS, encoding="utf-8")
    return directory


class Lab:
    """The imported corpus, its project and task, and helpers that select through the services."""

    def __init__(self, tmp_path: Path):
        from selection.memory.importing import corpus_import
        from selection.models import Project, Task

        self.corpus = corpus_import(write_lab(tmp_path / "tlab"))
        self.project = Project.objects.get(slug="tlab")
        self.task = Task.objects.get(corpus=self.corpus, uid="t-review")

    def select(self, *, budget=130, condition="C6", frame_version=None, dense=False, source="select"):
        from selection.memory import store
        from selection.serving import selections as services

        return services.run_selection(
            project=self.project,
            query=self.task.query,
            work_frame=store.work_frame_for_task(self.task),
            budget_tokens=budget,
            condition=condition,
            frame_version=frame_version,
            standpoint=self.task.standpoint,
            task=self.task,
            source=source,
            use_dense=dense,
        )

    def version(self, number: int):
        from authority.models import FrameVersion

        return FrameVersion.objects.get(project=self.project, number=number)

    def promote(self, number: int):
        from authority.models import Promotion

        sequence = Promotion.objects.filter(project=self.project).count() + 1
        Promotion.objects.create(project=self.project, frame_version=self.version(number), sequence=sequence)


@pytest.fixture(scope="module", autouse=True)
def embedding_cache():
    """The packaged model's real vectors, computed once per text for the whole module: every test
    imports the same corpus, and embedding is the slow part of an import.
    """
    from selection.memory import embeddings

    real = embeddings.embed_texts
    cache: dict[str, np.ndarray] = {}

    def cached(texts, batch_size=64, progress=None):
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            cache.update(zip(missing, real(missing, batch_size=batch_size), strict=True))
        if progress is not None:
            progress(len(texts))
        return np.stack([cache[t] for t in texts]) if texts else real(texts)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embeddings, "embed_texts", cached)
        yield


@pytest.fixture
def lab(db, tmp_path):
    return Lab(tmp_path)


@pytest.fixture
def people(lab, django_user_model):
    from authority.models import RoleGrant

    out = {}
    for role in ("lead", "reviewer", "auditor"):
        user = django_user_model.objects.create_user(role)
        RoleGrant.objects.create(user=user, project=lab.project, role=role)
        out[role] = user
    out["outsider"] = django_user_model.objects.create_user("outsider")
    return out


@pytest.fixture
def auditor_client(client, people):
    client.force_login(people["auditor"])
    return client


def rows_of(html: str) -> list[str]:
    """Unit ids of the candidate table's rows, in page order."""
    table = html[html.index('id="candidate-table"') :]
    return re.findall(r'<tr id="c-[^"]+" data-unit="([^"]+)"', table)


def detail(pk: int) -> str:
    return reverse("trace-detail", args=[pk])


# --- the trace page ---------------------------------------------------------------------------


def test_trace_page_shows_frames_policy_bundle_and_ledger(lab, auditor_client):
    trace = lab.select(budget=160).trace  # r1 admitted with its restatement n1 folded in
    html = auditor_client.get(detail(trace.pk)).content.decode()

    assert reverse("project-detail", args=["tlab"]) in html
    assert "tlab</a> v1" in html
    assert "frame-governance-engine/" in html and "staged-frame-conditioned-v1" in html
    assert "How should the ranking budget rule be reviewed?" in html
    assert trace.bundle_digest in html
    # each work-frame field with its citations; an uncited field is shown as a guess
    objective = html[html.index('data-field="objective"') :]
    assert "<code>s1</code>" in objective[: objective.index("</tr>")]
    constraints = html[html.index('data-field="constraints"') :]
    assert "guess" in constraints[: constraints.index("</tr>")]
    # the rendered bundle: the folded restatement and the supersession note
    bundle = html[html.index('id="bundle"') : html.index('id="charts"')]
    assert 'id="item-r1"' in bundle
    assert "folds restatements: <code>n1</code>" in bundle
    assert "Supersession: R0, superseded by R1" in bundle
    # charts load the vendored plotly.js, never a CDN, and only when a chart nears the screen: the
    # page itself loads no plotly (a first visit that stays at the top downloads none)
    assert 'data-plotly="/static/vendor/plotly/plotly-basic-3.7.0.min.js"' in html and "cdn" not in html.lower()
    assert '<script src="/static/vendor/plotly' not in html
    assert 'id="signal-data"' in html and 'id="stage-data"' in html


def test_ledger_labels_ecodes_and_missed_must_units_are_highlighted(lab, auditor_client):
    trace = lab.select().trace
    html = auditor_client.get(detail(trace.pk)).content.decode()

    p1 = re.search(r'<tr id="c-p1"[^>]*class="([^"]+)"', html)
    r1 = re.search(r'<tr id="c-r1"[^>]*class="([^"]+)"', html)
    rlong = re.search(r'<tr id="c-rlong"[^>]*class="([^"]+)"', html)
    assert "missed-must" in p1.group(1) and "missed-must" in r1.group(1)
    assert "missed-must" not in rlong.group(1)  # admitted
    row = html[html.index('id="c-p1"') :]
    row = row[: row.index("</tr>")]
    assert "MUST" in row and ">E2<" in row and "CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE" in row
    row = html[html.index('id="c-r1"') :]
    assert ">E3<" in row[: row.index("</tr>")]


def test_filters_narrow_the_table(lab, auditor_client):
    trace = lab.select().trace
    url = detail(trace.pk)
    everything = rows_of(auditor_client.get(url).content.decode())
    assert len(everything) == trace.candidates.count() == 16

    rejected = rows_of(auditor_client.get(url, {"disposition": "rejected"}).content.decode())
    assert set(rejected) == set(trace.candidates.filter(disposition="rejected").values_list("unit_uid", flat=True))
    assert 0 < len(rejected) < len(everything)

    missed_must = auditor_client.get(url, {"label": "MUST", "disposition": "not-admitted"})
    assert rows_of(missed_must.content.decode()) == ["r1", "p1"]  # pool order

    by_reason = rows_of(auditor_client.get(url, {"reason": "OUT_OF_PROJECT_SCOPE"}).content.decode())
    assert by_reason == ["o1"]
    assert rows_of(auditor_client.get(url, {"project": "tother"}).content.decode()) == ["o1"]
    assert set(rows_of(auditor_client.get(url, {"class": "result"}).content.decode())) == {
        "res1",
        "res2",
    }


def test_sorting_orders_the_table_and_htmx_gets_only_the_table(lab, auditor_client):
    from selection.memory.store import trace_result

    trace = lab.select().trace
    records = trace_result(trace).trace.candidates
    url = detail(trace.pk)

    response = auditor_client.get(url, {"sort": "-goal_relevance"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="candidates")
    html = response.content.decode()
    assert "<html" not in html and 'id="candidates"' in html
    order = rows_of(html)
    goal = {c.unit_id: c.signals.goal_relevance for c in records}
    assert [goal[u] for u in order] == sorted(goal.values(), reverse=True)
    assert 'aria-sort="descending"' in html

    order = rows_of(auditor_client.get(url, {"sort": "tokens"}).content.decode())
    tokens = {c.unit_id: c.unit_tokens for c in records}
    assert [tokens[u] for u in order] == sorted(tokens.values())

    # ranks that are empty (rejected before ranking) sort last in both directions
    order = rows_of(auditor_client.get(url, {"sort": "-rank"}).content.decode())
    ranks = [next(c.rank for c in records if c.unit_id == u) for u in order]
    ranked = [r for r in ranks if r is not None]
    assert ranked == sorted(ranked, reverse=True) and ranks[len(ranked) :] == [None] * (len(ranks) - len(ranked))


# --- verify -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dense", [False, True], ids=["bm25", "hybrid"])
def test_verify_reports_a_match_and_writes_nothing(lab, auditor_client, dense):
    from selection.models import Trace

    trace = lab.select(dense=dense).trace
    before = Trace.objects.count()
    response = auditor_client.post(reverse("trace-verify", args=[trace.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert re.search(r'data-check="stored">\s*Stored bundle: <strong>matches', html)
    assert re.search(r'data-check="rerun">\s*Engine re-run: <strong>matches', html)
    assert "mismatch</span>" not in html
    assert Trace.objects.count() == before


def test_verify_detects_a_tampered_bundle_on_an_in_memory_copy(lab):
    from selection.traces.selectors import trace_verify

    trace = lab.select().trace
    assert trace_verify(trace).stored_ok and trace_verify(trace).rerun_ok
    # traces are append-only; tamper with an unsaved copy of the row
    tampered = type(trace).objects.select_related("project", "task").get(pk=trace.pk)
    tampered.bundle = dict(tampered.bundle, rendered=tampered.bundle["rendered"] + "injected\n")
    result = trace_verify(tampered)
    assert not result.stored_ok
    assert [c.name for c in result.stored if not c.ok] == [
        "sha256 of the stored rendered bundle",
        "items concatenate to the rendered bundle",
    ]
    forged = type(trace).objects.select_related("project", "task").get(pk=trace.pk)
    forged.bundle_digest = "0" * 64
    result = trace_verify(forged)
    assert not result.stored_ok and not result.rerun_ok
    assert not next(c for c in result.rerun if c.name == "re-run bundle digest").ok


# --- loss funnel and near misses ----------------------------------------------------------------


def test_loss_funnel_per_trace_and_summed(lab, auditor_client, people):
    from django.template.loader import render_to_string

    from selection.engine.explain import FUNNEL_STAGES
    from selection.traces.selectors import trace_explained, traces_funnel

    tight = lab.select().trace
    roomy = lab.select(budget=400).trace
    funnel = trace_explained(tight, user=people["auditor"]).funnel
    assert funnel.must == 3
    assert dict(funnel.counts) == {
        "absent": 0,
        "never_surfaced": 0,
        "ineligible": 1,
        "lost": 1,
        "folded": 0,
        "admitted": 1,
    }
    assert dict(funnel.units) == {"p1": "ineligible", "r1": "lost", "rlong": "admitted"}
    # the funnel's stages are the attribution's E-codes, unit for unit
    stage_code = {key: code for key, code, _ in FUNNEL_STAGES}
    units = trace_explained(tight, user=people["auditor"]).attribution.units
    attributed = {e.unit_id: e.code for e in units if e.label == "MUST"}
    assert {u: stage_code[s] for u, s in funnel.units if s != "admitted"} == attributed

    summed = traces_funnel([tight.pk, roomy.pk])
    assert summed.traces == 2 and summed.must == 6
    assert summed.count("admitted") == 1 + trace_explained(roomy, user=people["auditor"]).funnel.count("admitted")

    html = render_to_string("selection/trace_funnel.html", {"funnel": summed, "funnel_title": "C6"})
    assert 'data-stage="ineligible"' in html and "over 2 traces" in html
    page = auditor_client.get(detail(tight.pk)).content.decode()
    assert re.search(r'data-stage="lost">.*?data-count="1"', page, re.S)


def test_backtest_funnels_sum_each_side(lab, people):
    from backtest.models import Backtest, TaskReplay
    from backtest.selectors import backtest_funnels
    from governance.models import Proposal

    proposal = Proposal.objects.get(project=lab.project)
    backtest = Backtest.objects.create(
        proposal=proposal,
        baseline_version=proposal.base_version,
        candidate_version=proposal.frame_version,
        task_ids=[lab.task.pk],
        task_set_digest="d",
        engine_version="e",
        gates={},
    )
    base = lab.select(source="backtest").trace
    cand = lab.select(frame_version=proposal.frame_version, source="backtest").trace
    for side, trace in (("baseline", base), ("candidate", cand)):
        TaskReplay.objects.create(backtest=backtest, task=lab.task, side=side, trace=trace, metrics={})
    funnels = backtest_funnels(backtest)
    assert funnels["baseline"].must == funnels["candidate"].must == 3
    assert dict(funnels["baseline"].counts)["ineligible"] == 1


def test_near_misses_show_cost_and_what_would_give_way(lab, auditor_client, people):
    from selection.engine.explain import item_members, render_trace_item
    from selection.memory.store import units_by_uid
    from selection.traces.selectors import trace_explained

    trace = lab.select().trace
    explained = trace_explained(trace, user=people["auditor"])
    engine_trace, bundle = explained.result.trace, explained.result.bundle
    # the re-rendering of omitted items is exact: it reproduces every admitted item byte for byte
    members = item_members(engine_trace)
    units = units_by_uid(corpus_id=lab.corpus.pk, uids=[i.sources[0] for i in bundle.items])
    for item in bundle.items:
        rendered = render_trace_item(engine_trace, item.item_id, members[item.item_id], units[item.sources[0]])
        assert rendered == item.rendered

    r1 = next(n for n in explained.near_misses if n.unit_id == "r1")
    assert r1.sources == ("r1", "n1")  # its restatement would have folded into it
    assert r1.tokens > r1.remaining_at_decision
    freed = sum(g.tokens for g in r1.give_way)
    assert freed >= r1.deficit and freed - r1.give_way[-1].tokens < r1.deficit  # no more than needed
    assert [g.rank for g in r1.give_way] == sorted((g.rank for g in r1.give_way), reverse=True)
    assert {n.unit_id for n in explained.near_misses} == {
        c.unit_id
        for c in engine_trace.candidates
        if c.disposition == "budget_omitted" and c.item_id == f"item-{c.unit_id}"
    }
    html = auditor_client.get(detail(trace.pk)).content.decode()
    section = html[html.index('id="near-misses"') : html.index('id="bundle"')]
    assert 'data-unit="r1"' in section and f'<td class="num">{r1.tokens}</td>' in section


# --- counterfactuals ---------------------------------------------------------------------------


def _option(html: str, kind: str) -> dict:
    match = re.search(rf'id="cf-{kind}" data-kind="{kind}" data-found="(\w+)" data-value="([^"]*)"', html)
    return {"found": match.group(1) == "true", "value": match.group(2)}


def test_counterfactual_finds_the_smallest_budget_increase(lab, auditor_client):
    trace = lab.select().trace
    html = auditor_client.get(reverse("trace-counterfactual", args=[trace.pk, "r1"])).content.decode()
    option = _option(html, "budget")
    assert option["found"]
    extra = int(option["value"])
    assert 0 < extra <= 130
    assert "reproduces the stored digest" in html

    def admitted(budget: int) -> bool:
        return "r1" in lab.select(budget=budget).result.trace.admitted_unit_ids()

    assert admitted(130 + extra) and not admitted(130 + extra - 1)


def test_counterfactual_moves_an_absent_class_into_the_work_type_list(lab, auditor_client):
    from selection.memory import store

    trace = lab.select().trace
    html = auditor_client.get(reverse("trace-counterfactual", args=[trace.pk, "p1"])).content.decode()
    option = _option(html, "class_rank")
    assert option["found"]
    k = int(option["value"])
    assert not _option(html, "budget")["found"]  # a bigger budget cannot undo a policy rejection
    assert "pulls no classes" not in html  # C6 has a class pull; it just does not help here

    # recompute with the engine: k places up admits p1, k - 1 does not
    from selection.engine.counterfactual import _with_classes  # noqa: PLC2701

    result = store.trace_result(trace)
    frame = result.trace.project_frame
    listed = list(frame.classes_for("review"))

    def admits(places: int) -> bool:
        if places == 0:
            changed = frame
        else:
            order = listed[:]
            order.insert(len(listed) - places + 1, "prose")
            changed = _with_classes(frame, "work_type", "review", order)
        request = replace(store_request(lab, trace), project_frame=changed)
        from selection.engine.pipeline import select

        rerun = select(request, store.corpus_index(lab.corpus.pk), result.trace.config)
        return "p1" in rerun.trace.admitted_unit_ids()

    assert admits(k) and not admits(k - 1)


def store_request(lab, trace):
    from selection.memory import store
    from selection.memory.store import trace_result
    from selection.traces.selectors import stored_request

    return stored_request(trace, trace_result(trace), store.corpus_index(trace.project.corpus_id))


def test_counterfactual_of_an_admitted_unit_says_nothing_needs_to_change(lab, auditor_client):
    trace = lab.select().trace
    html = auditor_client.get(reverse("trace-counterfactual", args=[trace.pk, "rlong"])).content.decode()
    assert 'id="already"' in html
    assert auditor_client.get(reverse("trace-counterfactual", args=[trace.pk, "nowhere"])).status_code == 404


# --- diff, then and now -------------------------------------------------------------------------


def test_diff_lists_units_admitted_and_dropped_between_frame_versions(lab, auditor_client):
    a = lab.select().trace
    b = lab.select(frame_version=lab.version(2)).trace  # notes first in review
    html = auditor_client.get(reverse("trace-diff"), {"a": a.pk, "b": b.pk}).content.decode()

    gained, dropped = set(b.admitted) - set(a.admitted), set(a.admitted) - set(b.admitted)
    assert gained and dropped
    section = html[html.index('id="diff-admitted"') : html.index('id="diff-dropped"')]
    assert set(re.findall(r'data-unit="([^"]+)"', section)) == gained
    section = html[html.index('id="diff-dropped"') : html.index('id="diff-reasons"')]
    assert set(re.findall(r'data-unit="([^"]+)"', section)) == dropped
    assert "frame version" in html and '<td class="mark-removed-soft">v1</td>' in html
    reasons = html[html.index('id="diff-reasons"') : html.index('id="diff-signals"')]
    for uid in gained | dropped:
        assert f'data-unit="{uid}"' in reasons
    signals = html[html.index('id="diff-signals"') :]
    assert "goal_relevance" in signals  # the class order moved goal relevance


def test_then_and_now_refuses_auditors_and_writes_nothing(lab, people, client):
    from selection.models import Trace

    trace = lab.select().trace
    lab.promote(2)
    client.force_login(people["auditor"])
    page = client.get(reverse("trace-now", args=[trace.pk]))
    assert page.status_code == 200 and 'id="replay-form"' not in page.content.decode()
    before = Trace.objects.count()
    assert client.post(reverse("trace-now", args=[trace.pk])).status_code == 403
    assert Trace.objects.count() == before
    from authority.models import AuditEntry

    assert not AuditEntry.objects.filter(action="trace.replayed").exists()


@pytest.mark.parametrize("role", ["lead", "reviewer"])
def test_then_and_now_replays_under_todays_frame_side_by_side(lab, people, client, role):
    from selection.models import Trace

    trace = lab.select().trace
    lab.promote(2)
    client.force_login(people[role])
    response = client.post(reverse("trace-now", args=[trace.pk]))
    replay = Trace.objects.exclude(pk=trace.pk).get()
    assert response.status_code == 302
    assert response["Location"].endswith(f"?replay={replay.pk}")
    assert (replay.source, replay.frame_version, replay.task_id) == ("replay", 2, trace.task_id)
    assert (replay.query, replay.budget_tokens, replay.condition) == (
        trace.query,
        trace.budget_tokens,
        trace.condition,
    )
    html = client.get(response["Location"]).content.decode()
    assert 'id="diff-admitted"' in html and '<td class="mark-added-soft">v2</td>' in html
    from authority.models import AuditEntry

    entry = AuditEntry.objects.get(action="trace.replayed")
    assert (entry.actor, entry.payload) == (people[role], {"from_trace": trace.pk, "to_trace": replay.pk})


def test_roles_outside_the_project_see_nothing(lab, people, client):
    trace = lab.select().trace
    client.force_login(people["outsider"])
    for url in (
        detail(trace.pk),
        reverse("trace-verify", args=[trace.pk]),
        reverse("trace-counterfactual", args=[trace.pk, "r1"]),
        reverse("trace-export", args=[trace.pk, "json"]),
        reverse("trace-now", args=[trace.pk]),
    ):
        assert client.get(url).status_code == 403, url
    listing = client.get(reverse("trace-list")).content.decode()
    assert f'data-trace="{trace.pk}"' not in listing


# --- export ------------------------------------------------------------------------------------


def test_export_json_round_trips_and_csv_has_one_row_per_candidate(lab, auditor_client):
    from selection.engine.outputs import ContextTrace
    from selection.memory.store import trace_result

    trace = lab.select().trace
    response = auditor_client.get(reverse("trace-export", args=[trace.pk, "json"]))
    assert response["Content-Disposition"].endswith(f'trace-{trace.pk}.json"')
    rebuilt = ContextTrace.from_dict(json.loads(response.content))
    assert rebuilt == trace_result(trace).trace

    response = auditor_client.get(reverse("trace-export", args=[trace.pk, "csv"]))
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["unit"] for r in rows] == list(trace.candidates.order_by("position").values_list("unit_uid", flat=True))
    p1 = next(r for r in rows if r["unit"] == "p1")
    assert (p1["label"], p1["ecode"], p1["reason"]) == (
        "MUST",
        "E2",
        "CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE",
    )
    assert float(p1["goal_relevance"]) >= 0 and p1["eligible"] == "False"


# --- history -----------------------------------------------------------------------------------


def test_history_searches_by_every_filter(lab, auditor_client):
    from django.utils import timezone

    c6 = lab.select().trace
    c2 = lab.select(condition="C2").trace
    v2 = lab.select(frame_version=lab.version(2)).trace
    url = reverse("trace-list")

    def found(**params) -> set[int]:
        html = auditor_client.get(url, params).content.decode()
        return {int(pk) for pk in re.findall(r'data-trace="(\d+)"', html)}

    everything = {c6.pk, c2.pk, v2.pk}
    assert found() == everything
    assert found(project="tlab") == everything and found(project="tother") == set()
    assert found(frame_version=2) == {v2.pk}
    assert found(task="t-review") == everything and found(task="other") == set()
    today = timezone.now().date().isoformat()
    assert found(since=today, until=today) == everything
    assert found(until="2020-01-01") == set()
    # OUT_OF_PROJECT_SCOPE needs the scope filter: every condition here has it
    assert found(reason="CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE") == {c6.pk, v2.pk}
    assert found(unit="p1", disposition="rejected") == {c6.pk, v2.pk}
    assert found(unit="p1", disposition="budget_omitted") == {c2.pk}
    assert found(unit="nowhere") == set()

    csv_rows = list(
        csv.DictReader(
            io.StringIO(
                b"".join(
                    auditor_client.get(
                        reverse("trace-search-export", args=["csv"]), {"frame_version": 2}
                    ).streaming_content
                ).decode()
            )
        )
    )
    assert [int(r["id"]) for r in csv_rows] == [v2.pk]
    doc = auditor_client.get(reverse("trace-search-export", args=["json"]), {"unit": "p1"}).json()
    assert doc["count"] == 3 and {t["id"] for t in doc["traces"]} == everything


def test_history_query_count_is_pinned(lab, auditor_client, django_assert_max_num_queries, monkeypatch):
    from selection.traces import views

    monkeypatch.setattr(views, "TRACE_PAGE_SIZE", 5)
    for _ in range(2):
        lab.select()
    url = reverse("trace-list")
    with django_assert_max_num_queries(9) as small:
        auditor_client.get(url, {"unit": "p1", "disposition": "rejected"})
    for _ in range(6):
        lab.select()
    with django_assert_max_num_queries(9) as large:
        response = auditor_client.get(url, {"unit": "p1", "disposition": "rejected"})
    assert len(large.captured_queries) == len(small.captured_queries)
    html = response.content.decode()
    assert len(re.findall(r'data-trace="', html)) == 5 and "page 1 of 2" in html


def _good_context_trace(lab):
    from selection.memory import store
    from selection.serving import selections as services

    # a query that reaches every MUST unit and not the superseded r0 (no E4), at a wide budget
    return services.run_selection(
        project=lab.project,
        query="why pipeline exists readers clause evidence review recall relevance candidates",
        work_frame=store.work_frame_for_task(lab.task),
        budget_tokens=5000,
        condition="C2",
        standpoint=lab.task.standpoint,
        task=lab.task,
        use_dense=False,
    ).trace


def test_a_recorded_failed_answer_on_good_context_is_attributed_e6(lab, people):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from selection.traces.selectors import trace_explained

    trace = _good_context_trace(lab)
    before = trace_explained(trace, user=people["auditor"]).attribution
    assert not [e for e in before.units if e.label == "MUST" or e.code == "E4"], before
    with pytest.raises(CommandError, match="may not report"):
        call_command("record_outcome", str(trace.pk), verdict="failed", user="outsider")
    call_command("record_outcome", str(trace.pk), verdict="failed", user="reviewer", note="wrong answer")
    assert trace.outcomes.get().verdict == "failed"
    after = trace_explained(trace, user=people["auditor"]).attribution
    assert "E6" in after.codes
    # a trace that missed required evidence is not a reader failure, whatever the outcome says
    missed = lab.select().trace
    call_command("record_outcome", str(missed.pk), verdict="failed", user="reviewer")
    assert "E6" not in trace_explained(missed, user=people["auditor"]).attribution.codes


def test_an_agent_reports_a_failed_answer_through_the_api_and_the_trace_reads_e6(lab, people, client):
    from governance.tokens import services as tokens
    from selection.traces.selectors import trace_explained

    trace = _good_context_trace(lab)
    assert "E6" not in trace_explained(trace, user=people["auditor"]).attribution.codes
    url = f"/api/v1/traces/{trace.pk}/outcomes"
    read_only = tokens.token_create(user=people["reviewer"], name="ci").secret
    refused = client.post(
        url, {"verdict": "failed"}, content_type="application/json", headers={"Authorization": f"Bearer {read_only}"}
    )
    assert refused.status_code == 403 and not trace.outcomes.exists()
    secret = tokens.token_create(user=people["reviewer"], name="agent", project=lab.project, role="reviewer").secret
    response = client.post(
        url,
        {"verdict": "failed", "note": "the answer ignored the clause"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 201, response.content[:2000]
    assert response.json()["verdict"] == "failed" and response.json()["reporter"] == "reviewer"
    assert "E6" in trace_explained(trace, user=people["auditor"]).attribution.codes
    # the trace page's attribution says so to an auditor
    client.force_login(people["auditor"])
    html = client.get(reverse("trace-detail", args=[trace.pk])).content.decode()
    table = html[html.index('id="attribution"') :]
    assert "<code>E6</code>" in table[: table.index("</table>")]
