"""The evaluation ladder on the fixture corpus: the experiment's claims as regression tests, the
stored evaluation, the command and the pages. Real PostgreSQL, real embedding model.

context-lab is imported and evaluated once for the module (about 20 s) and the database flushed
afterwards, so later modules still start from an empty database.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import NoReverseMatch, reverse

from selection.engine.attribution import LOSS_STAGES
from selection.engine.conditions import LADDER, UnknownCondition
from selection.engine.metrics import METRICS
from selection.evaluation.aggregation import ECODES, ecode_counts, hazard_table, mean_metrics, pair_overlaps
from selection.evaluation.jobs import job_run
from selection.evaluation.ladder import ALL_CONDITIONS, EvaluationError, evaluation_run, parse_conditions
from selection.memory import store
from selection.models import Corpus, Evaluation, EvaluationRun, Job, Task, Trace

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "context-lab"


@pytest.fixture(scope="module")
def lab(django_db_setup, django_db_blocker):
    """(evaluation pk, result document) of the whole ladder on context-lab."""
    from selection.memory.importing import corpus_import

    with django_db_blocker.unblock():
        corpus = Corpus.objects.filter(name="context-lab").first() or corpus_import(FIXTURE)
        evaluation = evaluation_run(corpus=corpus)
        yield evaluation.pk, evaluation.result
        store.forget_index(corpus.pk)
        # ids stay unique (no sequence reset), so no process-wide cached index can be mistaken
        call_command("flush", interactive=False, verbosity=0, reset_sequences=False)


@pytest.fixture
def doc(lab, db):
    return lab[1]


def mean(doc, condition, metric):
    return doc["conditions"][condition]["mean"][metric]


def per_task(doc, condition, metric):
    return {t: row[metric] for t, row in doc["conditions"][condition]["tasks"].items()}


# --- pure aggregation (no database) -----------------------------------------------------------


def test_parse_conditions_orders_dedupes_and_rejects_unknown_names():
    assert parse_conditions(None) == ALL_CONDITIONS == LADDER + ("CO",)
    assert parse_conditions("") == ALL_CONDITIONS
    assert parse_conditions("CO, C4,C0,C4") == ("C0", "C4", "CO")
    with pytest.raises(UnknownCondition, match="C9"):
        parse_conditions(["C0", "C9"])


def test_mean_metrics_is_the_plain_mean_over_tasks():
    rows = {"a": {"precision": 0.5, "tokens": 100}, "b": {"precision": 0.0, "tokens": 301}}
    assert mean_metrics(rows, ("precision", "tokens")) == {"precision": 0.25, "tokens": 200.5}
    assert mean_metrics({}, ("precision",)) == {"precision": 0.0}


def test_pair_overlaps_are_jaccard_and_skip_lonely_pairs():
    admitted = {
        "C0": {"a": {"u1", "u2"}, "b": {"u1", "u2"}, "c": {"u1"}, "d": {"u9"}},
        "C4": {"a": {"u1", "u2"}, "b": {"u3"}, "c": {"u1", "u3"}, "d": {"u9"}},
    }
    table = pair_overlaps({"p": ["a", "b"], "three": ["a", "b", "c"], "alone": ["d"]}, admitted)
    assert table["p"] == {"C0": 1.0, "C4": 0.0}
    # the mean of ab, ac, bc: C0 (1 + 1/2 + 1/2) / 3, C4 (0 + 1/3 + 1/2) / 3
    assert table["three"]["C0"] == pytest.approx(2 / 3)
    assert table["three"]["C4"] == pytest.approx((1 / 3 + 1 / 2) / 3)
    assert "alone" not in table


def test_hazard_table_compares_the_wrong_frame_with_the_right_one_and_with_no_frame():
    table = hazard_table({"t": ("report-review", 0.25)}, {"t": 1.0}, {"t": 0.5})
    assert table == {
        "t": {
            "work_type": "report-review",
            "declared": 1.0,
            "misassigned": 0.25,
            "C0": 0.5,
            "damage": 0.75,
            "worse_than_C0": True,
        }
    }


def test_prefix_stability_is_the_shared_start_of_consecutive_bundles():
    from selection.engine.metrics import prefix_share, prefix_stability

    assert prefix_share("root|a|b", "root|c") == 5 / 6
    assert prefix_share("x", "") == 1.0 and prefix_share("", "abc") == 0.0
    assert prefix_stability({"p": ["root|a", "root|b", "root|b"], "q": ["z"]}) == (5 / 6 + 1.0) / 2
    assert prefix_stability({"q": ["only one"]}) == 1.0


def test_ecode_counts_lists_every_code():
    counts = ecode_counts({"a": {"u1": "E1", "u2": "E4"}, "b": {"u1": "E1"}, "c": {}})
    assert list(counts) == list(ECODES)
    assert counts["E1"] == 2 and counts["E4"] == 1 and counts["E0"] == 0


# --- the experiment's claims on context-lab ---------------------------------------------------


def test_the_same_query_gives_the_same_bundle_at_c0_and_diverges_at_c4(doc):
    assert set(doc["pairs"]) == {"report-review", "what-is-left"}
    for pair, row in doc["pairs"].items():
        assert row["C0"] == 1.0, pair
        assert row["C4"] <= 0.5, pair


def test_project_scope_removes_all_leakage(doc):
    assert mean(doc, "C0", "leakage") > 0  # there is something to remove
    assert set(per_task(doc, "C2", "leakage").values()) == {0.0}


def test_the_corpus_layers_admit_nothing_harmful(doc):
    assert mean(doc, "C4", "harmful_admission") > 0
    assert set(per_task(doc, "C5", "harmful_admission").values()) == {0.0}


def test_the_work_frame_raises_must_include_recall_over_the_baseline(doc):
    assert mean(doc, "C4", "must_include_recall") > mean(doc, "C0", "must_include_recall")


def test_the_oracle_is_the_ceiling(doc):
    assert mean(doc, "CO", "must_include_recall") == 1.0
    assert mean(doc, "CO", "precision") == 1.0
    for c in LADDER:
        assert mean(doc, "CO", "tokens") < mean(doc, c, "tokens"), c


def test_a_misassigned_frame_lowers_recall_on_every_hazard_task(doc):
    hazard_tasks = set(
        Task.objects.filter(corpus__name="context-lab").exclude(misassigned_work_type="").values_list("uid", flat=True)
    )
    assert set(doc["hazard"]) == hazard_tasks and len(hazard_tasks) == 4
    for task, row in doc["hazard"].items():
        assert row["misassigned"] < row["declared"], task
        assert row["declared"] == per_task(doc, "C6", "must_include_recall")[task]
        assert row["C0"] == per_task(doc, "C0", "must_include_recall")[task]
    # the wrong frame is worse than no frame at all somewhere: the hazard is real
    assert any(row["worse_than_C0"] for row in doc["hazard"].values())


def test_every_bundle_item_keeps_a_source_reference(lab, db):
    traces = Trace.objects.filter(pk__in=EvaluationRun.objects.filter(evaluation_id=lab[0]).values("trace"))
    items = [item for trace in traces for item in trace.bundle["items"]]
    assert items
    assert all(item["sources"] for item in items)
    assert all(trace.bundle_tokens <= trace.budget_tokens for trace in traces)


# --- the document and the stored evaluation ---------------------------------------------------


def test_the_json_document_has_the_documented_shape(doc):
    tasks = list(Task.objects.filter(corpus__name="context-lab").values_list("uid", flat=True))
    assert doc["corpus"] == "context-lab"
    assert isinstance(doc["engine_version"], str) and doc["engine_version"]
    assert list(doc["conditions"]) == list(ALL_CONDITIONS)
    for block in doc["conditions"].values():
        assert set(block["mean"]) == set(METRICS)
        assert all(isinstance(v, float) for v in block["mean"].values())
        assert set(block["tasks"]) == set(tasks)
        for row in block["tasks"].values():
            assert set(METRICS) <= set(row)
            assert isinstance(row["admitted"], list)
            assert all(code in ECODES for code in row["ecodes"].values())
    for row in doc["pairs"].values():
        assert set(row) == set(ALL_CONDITIONS)
    for condition, losses in doc["stage_losses"].items():
        # recall at every stage: the stages account for every MUST unit, and `recalled` is recall
        assert list(losses["counts"]) == list(LOSS_STAGES)
        assert sum(losses["counts"].values()) == losses["must"] > 0
        for row in doc["conditions"][condition]["tasks"].values():
            must = sum(row["losses"].values())
            assert row["losses"]["recalled"] == round(row["must_include_recall"] * must)
    assert doc["stage_losses"]["CO"]["shares"]["recalled"] == 1.0
    for row in doc["hazard"].values():
        assert {"declared", "misassigned", "C0"} <= set(row)
    json.dumps(doc)  # plain JSON all the way down


def test_the_stored_evaluation_links_every_task_and_condition_to_its_trace(lab, db):
    evaluation = Evaluation.objects.get(pk=lab[0])
    doc = evaluation.result
    runs = list(evaluation.runs.select_related("task", "trace"))
    tasks = Task.objects.filter(corpus__name="context-lab").count()
    declared = [r for r in runs if r.variant == "declared"]
    assert len(declared) == tasks * len(ALL_CONDITIONS)
    assert {(r.task.uid, r.condition) for r in declared} == {
        (t, c) for c in ALL_CONDITIONS for t in doc["conditions"][c]["tasks"]
    }
    for run in declared:
        row = doc["conditions"][run.condition]["tasks"][run.task.uid]
        assert run.trace.task_id == run.task_id
        assert run.trace.condition == run.condition
        assert run.trace.source == "evaluation"
        assert row["trace"] == run.trace_id
        assert row["admitted"] == run.trace.admitted
        assert run.metrics["must_include_recall"] == row["must_include_recall"]
    wrong = [r for r in runs if r.variant == "misassigned"]
    assert {r.task.uid for r in wrong} == set(doc["hazard"])
    for run in wrong:
        assert run.condition == "C6"
        assert run.trace.header["work_frame"]["work_type"] == run.task.misassigned_work_type
        assert doc["misassigned"][run.task.uid]["trace"] == run.trace_id


# --- the command on a corpus built here -------------------------------------------------------

TINY_CORPUS = """\
name: tiny-eval
standpoint: 2026-09-20T12:00:00Z
projects:
  - slug: tiny-a
    name: Tiny A
    frame:
      scope: [tiny-a]
      default_classes: [note]
      work_types:
        review: [rule, note]
        release: [todo]
  - slug: tiny-b
    name: Tiny B
    frame:
      scope: [tiny-b]
"""
TINY_UNITS = [
    {"id": "a-rule", "project": "tiny-a", "class": "rule", "text": "Every ranking change must beat the baseline."},
    {"id": "a-note", "project": "tiny-a", "class": "note", "text": "The baseline ranks by BM25 and dense retrieval."},
    {
        "id": "a-todo",
        "project": "tiny-a",
        "class": "todo",
        "text": "Rehearse the rollback before the release.",
        "open_loop": {"status": "open", "kind": "todo"},
    },
    {"id": "b-note", "project": "tiny-b", "class": "note", "text": "Our ranking change beat the baseline."},
]
TINY_TASKS = """\
tasks:
  - id: review
    project: tiny-a
    pair: same
    query: What about the ranking change?
    budget_tokens: 40
    frame: {objective: Decide whether the change ships., work_type: review}
    misassigned_work_type: release
    ledger: {a-rule: MUST, a-note: SHOULD, b-note: HARMFUL}
  - id: release
    project: tiny-a
    pair: same
    query: What about the ranking change?
    budget_tokens: 40
    frame: {work_type: release}
    ledger: {a-todo: MUST}
  - id: unframed
    project: tiny-b
    query: baseline
    budget_tokens: 100
    ledger: {}
"""


def write_tiny(directory: Path, *, tasks: str | None = TINY_TASKS, prefix: str = "tiny") -> Path:
    """The tiny corpus; another prefix gives other names and slugs (both unique per install)."""
    directory.mkdir(parents=True)
    (directory / "corpus.yaml").write_text(TINY_CORPUS.replace("tiny", prefix))
    units = "".join(json.dumps(u).replace("tiny", prefix) + "\n" for u in TINY_UNITS)
    (directory / "units.jsonl").write_text(units)
    if tasks is not None:
        (directory / "tasks.yaml").write_text(tasks.replace("tiny", prefix))
    return directory


@pytest.mark.django_db
def test_the_command_evaluates_any_corpus_that_imports(tmp_path, capsys):
    from selection.memory.importing import corpus_import

    corpus_import(write_tiny(tmp_path / "tiny"))
    out_path = tmp_path / "tiny.json"
    call_command("evaluate", "tiny-eval", "--json", str(out_path))
    printed = capsys.readouterr().out
    for heading in ("Ladder", "Per task: must_include_recall", "Pair overlap", "Hazard", "E-codes"):
        assert heading in printed
    doc = json.loads(out_path.read_text())
    assert doc["corpus"] == "tiny-eval"
    assert set(doc["conditions"]["C0"]["tasks"]) == {"review", "release", "unframed"}
    assert doc["pairs"]["same"]["C0"] == 1.0
    assert set(doc["hazard"]) == {"review"}
    # a task with no MUST has recall 1.0 by definition; the oracle admits its (empty) ledger
    assert doc["conditions"]["CO"]["tasks"]["unframed"]["must_include_recall"] == 1.0
    assert doc["conditions"]["CO"]["tasks"]["review"]["admitted"] == ["a-rule", "a-note"]
    evaluation = Evaluation.objects.get(corpus__name="tiny-eval")
    assert evaluation.runs.count() == 3 * len(ALL_CONDITIONS) + 1


@pytest.mark.django_db
def test_the_command_takes_a_subset_of_conditions_and_prints_json(tmp_path, capsys):
    from selection.memory.importing import corpus_import

    corpus_import(write_tiny(tmp_path / "tiny"))
    call_command("evaluate", "tiny-eval", "--conditions", "C4,C0", "--json", "-")
    doc = json.loads(capsys.readouterr().out)
    assert doc["condition_order"] == ["C0", "C4"]
    assert doc["hazard"] == {}  # the hazard needs C6


@pytest.mark.django_db
def test_the_command_refuses_what_it_cannot_evaluate(tmp_path):
    from selection.memory.importing import corpus_import

    with pytest.raises(CommandError, match='no corpus "nowhere"'):
        call_command("evaluate", "nowhere")
    corpus_import(write_tiny(tmp_path / "notasks", tasks=None, prefix="bare"))
    with pytest.raises(CommandError, match='"bare-eval" has no tasks'):
        call_command("evaluate", "bare-eval")
    corpus_import(write_tiny(tmp_path / "tiny"))
    with pytest.raises(CommandError, match="unknown condition 'C9'"):
        call_command("evaluate", "tiny-eval", "--conditions", "C0,C9")
    assert not Evaluation.objects.filter(corpus__name="tiny-eval").exists()


# --- the pages --------------------------------------------------------------------------------


@pytest.fixture
def people(lab, db, django_user_model):
    from authority.models import Role, RoleGrant
    from selection.models import Project

    sift = Project.objects.get(slug="sift")
    make = django_user_model.objects.create_user
    lead, auditor, outsider = make("lead"), make("auditor"), make("outsider")
    RoleGrant.objects.create(user=lead, project=sift, role=Role.LEAD)
    RoleGrant.objects.create(user=auditor, project=sift, role=Role.AUDITOR)
    return {"lead": lead, "auditor": auditor, "outsider": outsider}


def test_the_evaluation_page_shows_the_ladder_and_the_charts_data(client, people, lab):
    client.force_login(people["auditor"])
    page = client.get(reverse("evaluation-detail", args=[lab[0]]))
    assert page.status_code == 200
    html = page.content.decode()
    charts = page.context["charts"]
    assert [c["metric"] for c in charts] == list(METRICS)
    recall = charts[0]
    assert recall["x"] == list(LADDER)
    assert recall["y"] == [mean(lab[1], c, "must_include_recall") for c in LADDER]
    assert recall["oracle"] == 1.0
    assert 'id="evaluation-charts"' in html and '"oracle": 1.0' in html
    assert "vendor/plotly/plotly-basic-3.7.0.min.js" in html and "cdn" not in html.lower()
    for table in ("ladder", "pairs", "hazard", "ecodes", "tasks"):
        assert f'id="{table}"' in html
    # every per-task cell opens its trace (names it, where the trace page is not installed)
    any_trace = lab[1]["conditions"]["C4"]["tasks"]["t1-report-design"]["trace"]
    assert f"trace {any_trace}" in html
    try:
        assert f'href="{reverse("trace-detail", args=[any_trace])}"' in html
    except NoReverseMatch:
        pass


def test_the_list_page_lists_evaluations_and_offers_a_run_only_to_leads(client, people, lab):
    url = reverse("evaluation-list", args=["context-lab"])
    client.force_login(people["auditor"])
    page = client.get(url)
    assert page.status_code == 200
    assert reverse("evaluation-detail", args=[lab[0]]) in page.content.decode()
    assert 'id="run-evaluation"' not in page.content.decode()
    client.force_login(people["lead"])
    assert 'id="run-evaluation"' in client.get(url).content.decode()


def test_a_user_without_a_role_in_the_corpus_reads_nothing(client, people, lab):
    client.force_login(people["outsider"])
    assert client.get(reverse("evaluation-list", args=["context-lab"])).status_code == 403
    assert client.get(reverse("evaluation-detail", args=[lab[0]])).status_code == 403
    assert client.get(reverse("evaluation-list", args=["nowhere"])).status_code == 404


def test_only_a_lead_runs_an_evaluation(client, people, lab):
    url = reverse("evaluation-create", args=["context-lab"])
    before = Evaluation.objects.count()
    client.force_login(people["auditor"])
    assert client.post(url, {"conditions": ["C0", "CO"]}).status_code == 403
    assert Evaluation.objects.count() == before
    client.force_login(people["lead"])
    response = client.post(url, {"conditions": ["C0", "CO"]})
    job = Job.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("job-detail", args=[job.pk])
    assert job_run(job.pk).status == "finished"  # as the worker does
    created = Evaluation.objects.exclude(pk=lab[0]).get()
    page = client.get(response["Location"]).content.decode()
    assert reverse("evaluation-detail", args=[created.pk]) in page
    assert created.conditions == ["C0", "CO"]
    assert created.runs.count() == 2 * Task.objects.filter(corpus__name="context-lab").count()
    assert created.result["conditions"]["C0"]["mean"] == lab[1]["conditions"]["C0"]["mean"]


def test_the_service_refuses_an_actor_who_is_not_a_lead(people, lab):
    from authority.access import AccessDenied

    with pytest.raises(AccessDenied):
        evaluation_run(corpus="context-lab", conditions="C0", actor=people["auditor"])
    with pytest.raises(EvaluationError, match="unknown condition"):
        evaluation_run(corpus="context-lab", conditions="C0,C7", actor=people["lead"])
