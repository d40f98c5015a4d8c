"""An evaluation at scale: scoring reads the bundle's and the ledger's units, never the whole
corpus; the traces are written in bounded batches as the runs go, with the same ladder whatever the
batch; the command shows a progress bar."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from selection.engine.index.units import UnitTable
from selection.evaluation import ladder
from selection.evaluation.ladder import evaluation_run
from selection.evaluation.scoring import ledger_for_task, score_result
from selection.memory import store
from selection.memory.importing import corpus_import
from selection.models import Task, Trace
from selection.serving.selections import replay_task
from tests.selection.test_evaluation import write_tiny

pytestmark = pytest.mark.django_db

FILLER = 40  # units no task's bundle or ledger names


def tiny_with_filler(directory):
    """The evaluation tests' tiny corpus with FILLER more notes in project tiny-a."""
    write_tiny(directory)
    with (directory / "units.jsonl").open("a") as units:
        for i in range(FILLER):
            text = f"Filler note {i} about the weather in city number {i} and nothing else."
            units.write(json.dumps({"id": f"z-filler-{i:02}", "project": "tiny-a", "class": "note", "text": text}))
            units.write("\n")
    return corpus_import(directory)


def _made(index) -> set[int]:
    return {i for i, unit in enumerate(index.units._made) if unit is not None}


def test_scoring_reads_the_bundle_and_the_ledger_not_the_corpus(tmp_path, settings):
    settings.FG_INDEX_CACHE_DIR = str(tmp_path / "index-cache")
    corpus = tiny_with_filler(tmp_path / "tiny")
    store.forget_index(corpus.pk)
    store.corpus_index(corpus.pk)  # built and written to the cache
    for task in Task.objects.filter(corpus=corpus).select_related("project", "corpus"):
        selection = replay_task(task=task, condition="C6", persist=False)
        ledger = ledger_for_task(task)
        store.forget_index(corpus.pk)
        # read back from the cache: units as columns, each made when first read, none yet
        index = store.corpus_index(corpus.pk)
        assert isinstance(index.units, UnitTable) and len(index.units) == 4 + FILLER
        assert not _made(index)
        score = score_result(task, selection.result, selection.project_frame, ledger)
        named = {index.position[u] for u in {*score.admitted, *ledger} if u in index.position}
        assert _made(index) <= named, f"{task.uid}: scoring read units outside the bundle and the ledger"
        assert len(named) < 10


def test_traces_are_written_in_batches_as_the_runs_go_and_the_ladder_does_not_depend_on_it(tmp_path, monkeypatch):
    corpus = tiny_with_filler(tmp_path / "tiny")
    whole = evaluation_run(corpus=corpus)

    monkeypatch.setattr(ladder, "TRACE_BATCH", 8)
    written_while_running = []
    start = Trace.objects.count()

    def progress(done: int, total: int) -> None:
        written_while_running.append(Trace.objects.count() - start)

    batched = evaluation_run(corpus=corpus, progress=progress)
    runs = batched.runs.count()
    assert runs == whole.runs.count() > 8
    # visible before the evaluation's own transaction: written batch by batch, none held back more
    # than a batch
    assert written_while_running[0] > 0
    assert written_while_running[-1] >= runs - 8
    assert Trace.objects.count() - start == runs

    assert without_trace_ids(whole.result) == without_trace_ids(batched.result)


def without_trace_ids(doc):
    """The document with its trace ids (which differ between two runs) left out."""
    if isinstance(doc, dict):
        return {k: without_trace_ids(v) for k, v in doc.items() if k not in ("trace", "traces")}
    if isinstance(doc, list):
        return [without_trace_ids(v) for v in doc]
    return doc


def test_the_command_shows_a_progress_bar_on_stderr(tmp_path):
    tiny_with_filler(tmp_path / "tiny")
    out, err = io.StringIO(), io.StringIO()
    call_command("evaluate", "tiny-eval", "--quiet", stdout=out, stderr=err)
    assert "evaluating" in err.getvalue() and "3/3" in err.getvalue()
    assert "Ladder" in out.getvalue() and "evaluating" not in out.getvalue()
