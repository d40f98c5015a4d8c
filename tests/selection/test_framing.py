"""Establishing the work frame on the real PostgreSQL: long-form work types through import and
export, builders through the select command and the services, the trace page, the model builder
against a stand-in chat server, and the frame-builder table of `evaluate --builders`."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.urls import reverse

from selection.corpus import read_corpus
from selection.engine.builders import BuilderInput, BuilderTools, build_work_frame
from selection.engine.types import WorkSignal
from tests.selection.test_traces import embedding_cache  # noqa: F401 - the module's real vectors, once per text

CORPUS = """\
name: flab
description: Work types that describe themselves.
standpoint: 2026-09-20T12:00:00Z
projects:
  - slug: flab
    name: Frame lab
    frame:
      purpose: Exercise the frame builders.
      scope: [flab]
      default_classes: [note]
      class_pull: 1
      work_types:
        review:
          classes: [rule, result]
          description: Judging whether a ranking rule holds up against the retrieval baseline.
          cues: [review, baseline]
        release:
          classes: [todo, result]
          description: Deciding what is still open before a release can ship.
          cues: [release, ship]
        notes: [note]
      establishment:
        builder: cue
        thresholds:
          similarity: {margin: 0.01}
"""


def _unit(uid, cls, text):
    return {"id": uid, "project": "flab", "class": cls, "text": text, "created_at": "2026-09-01T10:00:00Z"}


UNITS = [
    _unit("rule1", "rule", "Ranking rule: every change is reviewed against the retrieval baseline."),
    _unit("res1", "result", "Result: the new ranking beat the baseline by two points of recall."),
    _unit("todo1", "todo", "Open: the release notes for Friday are not written yet."),
    _unit("todo2", "todo", "Open: the rollback runbook needs a check before the release ships."),
    _unit("note1", "note", "Note: the weekly meeting moved to Tuesday."),
    _unit("note2", "note", "Note: the baseline dashboard is slow on Mondays."),
]

TASKS = """\
tasks:
  - id: t-review
    project: flab
    query: Does the ranking rule hold against the baseline?
    budget_tokens: 200
    signals:
      - {id: s1, kind: user_message, content: Review the ranking rule against the retrieval baseline.}
    frame:
      objective: Decide whether the ranking rule stays.
      work_type: review
      cites: {objective: [s1], work_type: [s1]}
    ledger: {rule1: MUST, res1: SHOULD}
  - id: t-release
    project: flab
    query: What is left before Friday?
    budget_tokens: 200
    signals:
      - {id: r1, kind: user_message, content: "Can we ship the release on Friday?"}
      - {id: r2, kind: project_state, content: Two items are still open.}
    frame:
      objective: List what blocks the release.
      work_type: release
    misassigned_work_type: review
    ledger: {todo1: MUST, todo2: MUST}
  - id: t-ambiguous
    project: flab
    query: What should happen next?
    budget_tokens: 200
    signals:
      - {id: a1, kind: user_message, content: Review the release.}
    frame:
      objective: Decide what happens next.
      work_type: review
    ledger: {todo1: MUST, rule1: MUST}
"""


def write_corpus(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "corpus.yaml").write_text(CORPUS, encoding="utf-8")
    (directory / "units.jsonl").write_text("".join(json.dumps(u) + "\n" for u in UNITS), encoding="utf-8")
    (directory / "tasks.yaml").write_text(TASKS, encoding="utf-8")
    return directory


@pytest.fixture
def flab(db, tmp_path):
    from selection.memory.importing import corpus_import

    return corpus_import(write_corpus(tmp_path / "flab"))


def select(*args, **kwargs) -> str:
    from io import StringIO

    out = StringIO()
    call_command("select", *args, stdout=out, **kwargs)
    return out.getvalue()


# --- corpus format 1.1 long form -------------------------------------------------------------


class Rollback(Exception):
    pass


@pytest.mark.django_db
def test_long_form_work_types_import_and_export_byte_identical(tmp_path):
    from selection.memory.exporting import corpus_export
    from selection.memory.importing import corpus_import

    source = write_corpus(tmp_path / "source")
    with pytest.raises(Rollback), transaction.atomic():
        corpus_import(source)
        corpus_export("flab", tmp_path / "first")
        raise Rollback
    corpus_import(tmp_path / "first")
    corpus_export("flab", tmp_path / "second")
    first = (tmp_path / "first" / "corpus.yaml").read_text()
    assert first == (tmp_path / "second" / "corpus.yaml").read_bytes().decode()
    # the form each work type was written in comes back: long stays long, short stays short
    frame = read_corpus(tmp_path / "first").projects[0].frame
    assert frame["work_types"]["review"]["cues"] == ["review", "baseline"]
    assert frame["work_types"]["notes"] == ["note"]
    assert read_corpus(tmp_path / "first") == read_corpus(source)


def test_long_form_errors_name_the_yaml_path_and_field(tmp_path):
    from selection.corpus.issues import CorpusError

    broken = CORPUS.replace("cues: [release, ship]", "cues: [release, 7]").replace(
        "          description: Judging", "          summary: Judging"
    )
    directory = write_corpus(tmp_path / "bad")
    (directory / "corpus.yaml").write_text(broken)
    with pytest.raises(CorpusError) as caught:
        read_corpus(directory)
    text = str(caught.value)
    assert "projects[0].frame.work_types.review" in text and 'unknown key "summary"' in text
    assert "projects[0].frame.work_types.release.cues[1]" in text and "expected a string" in text


# --- no silent fallback ----------------------------------------------------------------------


def test_select_refuses_a_work_type_the_frame_does_not_list(flab):
    with pytest.raises(CommandError) as caught:
        select("--project", "flab", "--query", "Anything?", "--work-type", "triage")
    assert caught.value.returncode == 2
    assert 'work type "triage" is not listed by the flab frame v1; listed: notes, release, review' in str(
        caught.value
    )


def test_service_raises_a_typed_error_for_an_unlisted_work_type(flab):
    from selection.engine.policy import UnknownWorkType
    from selection.engine.types import WorkFrame
    from selection.models import Project
    from selection.serving.selections import run_selection

    with pytest.raises(UnknownWorkType):
        run_selection(
            project=Project.objects.get(slug="flab"),
            query="Anything?",
            work_frame=WorkFrame(work_type="triage"),
            budget_tokens=100,
            builder="default",
        )


# --- builders through select ------------------------------------------------------------------


def test_select_without_a_work_type_runs_the_frames_configured_builder(flab, tmp_path):
    signals = tmp_path / "signals.json"
    signals.write_text(json.dumps([{"id": "x1", "kind": "user_message", "content": "Can we ship the release?"}]))
    out = select("--project", "flab", "--query", "What is left?", "--signals", str(signals))
    assert "work frame inferred-confident by cue: work type release, margin 2.000 over review" in out
    assert "classes: work type release: its listed classes" in out
    unknown = select("--project", "flab", "--query", "What is left?", "--builder", "declared")
    assert "work frame unknown by declared" in unknown and "condition C6~query" in unknown


def test_select_refuses_an_unknown_builder(flab):
    with pytest.raises(CommandError, match="unknown frame builder 'keyword'; known: declared, cue"):
        select("--project", "flab", "--query", "Anything?", "--builder", "keyword")


def test_similarity_never_uses_the_task_being_judged(flab):
    from selection.models import Task
    from selection.serving.framing import task_work_frame
    from selection.serving.selections import frame_for

    task = Task.objects.get(uid="t-review")
    _, frame = frame_for(task.project)
    built = task_work_frame(task=task, builder="similarity", project_frame=frame)
    assert built.builder == "similarity" and built.work_type == "review"
    assert built.objective_by == "similarity" and built.cited("objective") == ("s1",)
    from selection.serving.framing import exemplars_for

    assert {e.task_id for e in exemplars_for(task.project, exclude_task_id=task.pk)} == {
        "t-release",
        "t-ambiguous",
    }


def test_trace_page_shows_how_the_frame_was_established(flab, client, django_user_model):
    from authority.models import RoleGrant
    from selection.engine.types import WorkFrame
    from selection.models import Project
    from selection.serving.selections import run_selection

    project = Project.objects.get(slug="flab")
    selection = run_selection(
        project=project,
        query="What should happen next?",
        work_frame=WorkFrame(signals=(WorkSignal("a1", "user_message", "Review the release."),)),
        budget_tokens=200,
        builder="cue",
        use_dense=False,
    )
    user = django_user_model.objects.create_user("auditor")
    RoleGrant.objects.create(user=user, project=project, role="auditor")
    client.force_login(user)
    html = client.get(reverse("trace-detail", args=[selection.trace.pk])).content.decode()
    assert '<span class="badge" id="establishment">inferred-ambiguous</span>' in html
    assert "Established by the <strong>cue</strong> builder as <code>release</code>" in html
    assert "margin 0.000 over the runner-up <code>review</code>" in html
    assert "The objective is the cue builder's own." in html.replace("&#x27;", "'")
    assert "merged order of the plausible work types release, review" in html
    work_type = html[html.index('data-field="work_type"') :]
    assert "<code>a1</code>" in work_type[: work_type.index("</tr>")]
    stored = selection.trace.header
    assert stored["work_frame"]["establishment"] == "inferred-ambiguous"
    # merged, and hedged: an inferred frame keeps the head of the query-only ranking
    assert stored["effective_condition"] == "C6~merged~head"
    assert "so it ran hedged as" in html and "<code>C6~merged~head</code>" in html
    assert "25% of the budget kept for the head of the scoped query-only ranking" in html
    # the similarity builder says how its confidence was calibrated on the declared tasks
    similar = run_selection(
        project=project,
        query="What should happen next?",
        work_frame=WorkFrame(signals=(WorkSignal("a1", "user_message", "Review the release."),)),
        budget_tokens=200,
        builder="similarity",
        use_dense=False,
    )
    html = client.get(reverse("trace-detail", args=[similar.trace.pk])).content.decode()
    assert "Established by the <strong>similarity</strong> builder" in html
    assert "Confidence needed a margin of" in html
    assert "leave-one-out over 3 declared past tasks" in html
    assert similar.trace.header["work_frame"]["calibration"].startswith("leave-one-out over 3")


# --- the model builder, against a stand-in for the chat endpoint ------------------------------


class ChatStandIn(BaseHTTPRequestHandler):
    """A stand-in for an OpenAI-compatible chat server (a boundary we do not own): it answers
    /v1/chat/completions with whatever `answer` holds, after `delay` seconds."""

    answer: str = ""
    delay: float = 0.0
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - the http.server protocol
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, **body})
        time.sleep(type(self).delay)
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": type(self).answer}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            self.wfile.write(payload.encode())
        except BrokenPipeError:  # the client gave up (the timeout test)
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatStandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ChatStandIn.answer, ChatStandIn.delay, ChatStandIn.requests = "", 0.0, []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _model_inputs():
    import yaml

    from selection.corpus.frames import check_frame
    from selection.corpus.places import Place, Report

    raw = yaml.safe_load(CORPUS)["projects"][0]["frame"]
    frame = check_frame(raw, Place("frame"), Report(), project="flab", declared=["flab"])
    signals = (
        WorkSignal("r1", "user_message", "Can we ship the release on Friday?"),
        WorkSignal("r2", "project_state", "Two items are still open."),
    )
    return BuilderInput(signals=signals, project_frame=frame)


GOOD = {
    "work_type": "release",
    "confidence": 0.9,
    "runner_up": "review",
    "runner_up_confidence": 0.1,
    "objective": "Decide what still blocks Friday's release.",
    "cites": {"work_type": ["r1"], "objective": ["r1", "r2"]},
}


def test_model_builder_reads_a_constrained_json_answer(chat_server):
    from selection.serving.reader_model import completion_client

    ChatStandIn.answer = json.dumps(GOOD)
    tools = BuilderTools(complete=completion_client(chat_server, "tiny", 2.0))
    frame = build_work_frame("model", _model_inputs(), tools)
    assert (frame.work_type, frame.establishment, frame.runner_up) == ("release", "inferred-confident", "review")
    assert frame.margin == pytest.approx(0.8)
    assert frame.objective == "Decide what still blocks Friday's release." and frame.objective_by == "model"
    assert frame.cited("objective") == ("r1", "r2")
    sent = ChatStandIn.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["model"] == "tiny"
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["work_type"]["enum"] == ["notes", "release", "review", "unknown"]


@pytest.mark.parametrize(
    "answer",
    [
        "not json at all",
        json.dumps({**GOOD, "work_type": "triage"}),  # not listed
        json.dumps({**GOOD, "confidence": 1.7}),
        json.dumps({**GOOD, "cites": {"work_type": ["zz"], "objective": []}}),  # no such signal
        json.dumps(["release"]),
    ],
)
def test_model_builder_malformed_answers_are_unknown(chat_server, answer):
    from selection.serving.reader_model import completion_client

    ChatStandIn.answer = answer
    tools = BuilderTools(complete=completion_client(chat_server, "tiny", 2.0))
    frame = build_work_frame("model", _model_inputs(), tools)
    assert frame.establishment == "unknown" and frame.work_type is None and frame.builder == "model"


def test_model_builder_timeout_and_refusal_are_unknown(chat_server):
    from selection.serving.reader_model import completion_client

    ChatStandIn.answer, ChatStandIn.delay = json.dumps(GOOD), 1.0
    slow = BuilderTools(complete=completion_client(chat_server, "tiny", 0.2))
    assert build_work_frame("model", _model_inputs(), slow).establishment == "unknown"
    refused = BuilderTools(complete=completion_client("http://127.0.0.1:9", "tiny", 0.5))
    assert build_work_frame("model", _model_inputs(), refused).establishment == "unknown"


def test_model_builder_is_off_by_default(flab):
    with pytest.raises(CommandError, match="model frame builder is off"):
        select("--project", "flab", "--query", "Anything?", "--builder", "model")


def test_select_runs_the_model_builder_when_configured(flab, chat_server, settings, tmp_path):
    settings.FG_READER_MODEL_URL, settings.FG_READER_MODEL_NAME = chat_server, "tiny"
    ChatStandIn.answer = json.dumps(GOOD)
    signals = tmp_path / "signals.json"
    signals.write_text(
        json.dumps(
            [
                {"id": "r1", "kind": "user_message", "content": "Can we ship the release on Friday?"},
                {"id": "r2", "kind": "project_state", "content": "Two items are still open."},
            ]
        )
    )
    out = select("--project", "flab", "--query", "What is left?", "--signals", str(signals), "--builder", "model")
    assert "work frame inferred-confident by model: work type release" in out


# --- evaluate --builders ------------------------------------------------------------------------


def test_evaluate_builders_writes_the_frame_builder_table(flab, tmp_path):
    path = tmp_path / "eval.json"
    from io import StringIO

    out = StringIO()
    call_command(
        "evaluate", "flab", "--conditions", "C0,C6", "--builders", "declared,cue", "--json", str(path), stdout=out
    )
    doc = json.loads(path.read_text())
    cue = doc["builders"]["cue"]
    assert set(doc["builders"]) == {"declared", "cue"}
    assert set(cue) == {"accuracy", "abstention", "no_abstention"}
    assert cue["accuracy"] == pytest.approx(2 / 3)
    tasks = cue["abstention"]["tasks"]
    assert set(tasks["t-ambiguous"]) == {"work_type", "establishment", "must_include_recall"}
    # the task built to be ambiguous: the builder's tie-break reads it wrongly (release), and says
    # so rather than presenting a confident wrong frame
    assert tasks["t-ambiguous"]["work_type"] == "release"
    assert tasks["t-ambiguous"]["establishment"] in ("inferred-ambiguous", "unknown")
    assert tasks["t-release"] == {
        "work_type": "release",
        "establishment": "inferred-confident",
        "must_include_recall": 1.0,
    }
    assert set(cue["no_abstention"]["mean"]) >= {"must_include_recall", "precision"}
    assert doc["builders"]["declared"]["accuracy"] == 1.0
    assert doc["builder_details"]["cue"]["establishment_counts"]["inferred-ambiguous"] == 1
    # the ambiguous frame ran merged and hedged, and the details say so
    assert doc["builder_details"]["cue"]["tasks"]["t-ambiguous"]["effective_condition"] == "C6~merged~head"
    # the hazard's wrong frame, checked against the cue builder's scores: the signals point to
    # release, so "review" is unknown and runs as scoped query-only
    wrong = doc["hazard_abstention"]["cue"]["t-release"]
    assert (wrong["work_type"], wrong["establishment"]) == ("review", "unknown")
    assert wrong["no_abstention"] == doc["hazard"]["t-release"]["misassigned"]
    assert "declared" not in doc["hazard_abstention"]
    printed = out.getvalue()
    assert "Frame builders (C6" in printed and "Builder hazard" in printed
    assert "Hazard with abstention" in printed
    with pytest.raises(CommandError, match="unknown frame builder 'keyword'"):
        call_command("evaluate", "flab", "--builders", "keyword", stdout=StringIO())


def test_evaluation_page_shows_the_builder_tables(flab, client, django_user_model):
    from authority.models import RoleGrant
    from selection.evaluation.ladder import evaluation_run
    from selection.models import Project

    evaluation = evaluation_run(corpus="flab", conditions="C0,C6", builders="cue")
    user = django_user_model.objects.create_user("auditor")
    RoleGrant.objects.create(user=user, project=Project.objects.get(slug="flab"), role="auditor")
    client.force_login(user)
    html = client.get(reverse("evaluation-detail", args=[evaluation.pk])).content.decode()
    table = html[html.index('id="builders"') : html.index('id="builder-cue"')]
    row = table[table.index('data-builder="cue"') :]
    cells = [c for c in __import__("re").findall(r'<td class="num">([^<]*)</td>', row[: row.index("</tr>")])]
    assert cells[0] == "0.667" and cells[3] == "1"  # accuracy; one ambiguous task
    per_task = html[html.index('id="builder-cue"') : html.index('id="builder-hazard"')]
    assert "t-ambiguous" in per_task and "inferred-ambiguous" in per_task
    assert "<code>C6~merged~head</code>" in per_task  # what abstention ran it as
    hazard = html[html.index('id="builder-hazard"') :]
    assert "t-ambiguous" in hazard[: hazard.index("</table>")]
    guarded = html[html.index('id="hazard-abstention"') :]
    assert "t-release" in guarded[: guarded.index("</table>")] and "unknown" in guarded
