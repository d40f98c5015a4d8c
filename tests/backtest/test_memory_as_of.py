"""Backtests replay memory as it was: tasks labelled before a thousand later writes (creates,
supersessions and erasures of units written after the labelling) give the same bundles and traces
as they did with memory held still; the same backtest "as of now" differs, and its page and JSON say so."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
from django.urls import reverse

from backtest import judging, services
from backtest.models import Backtest, TaskReplay
from backtest.replay import dispatch
from backtest.replay import services as replays
from selection.memory import store
from selection.models import Corpus, MemoryUnit, Task, Trace, TraceCandidate
from selection.serving.selections import run_selection
from selection.traces.labelling import trace_label
from tests.selection.memory_kit import unit_create, unit_erase, unit_supersede

from .conftest import proposal

pytestmark = pytest.mark.django_db

WRITES = 1000


def _run(backtest: Backtest) -> dict[tuple[int, str], tuple[str, str]]:
    """Every replay inline, no baseline reused; (task, side) -> (bundle digest, trace content digest)."""
    pairs = [(t, side) for t in backtest.task_ids for side in dispatch.replay_sides(backtest)]
    rows = replays.replay_many(backtest_id=backtest.pk, pairs=pairs, reuse_baseline=False)
    judging.backtest_finish(backtest_id=backtest.pk)
    out = {}
    for row in rows:
        if not isinstance(row, TaskReplay):  # an ablation variant: its bundle's units and metrics
            out[(row.task_id, row.variant)] = (json.dumps(row.admitted), json.dumps(row.metrics, sort_keys=True))
            continue
        trace = Trace.objects.get(pk=row.trace_id)
        records = list(TraceCandidate.objects.filter(trace=trace).order_by("position").values_list("record", flat=True))
        content = json.dumps([trace.header, trace.bundle, records], sort_keys=True, default=str)
        out[(row.task_id, row.side)] = (trace.bundle_digest, hashlib.sha256(content.encode()).hexdigest())
    return out


def test_a_backtest_of_labelled_tasks_replays_memory_as_it_was(sift, sift_users, client):
    lead = sift_users["lead"]
    corpus = Corpus.objects.get(pk=sift.corpus_id)
    # two tasks labelled from live selections; the imported ones labelled at the same sequence
    labelled = []
    for task in Task.objects.filter(project=sift).order_by("position")[:2]:
        selection = run_selection(
            project=sift, query=task.query, work_frame=store.work_frame_for_task(task),
            budget_tokens=task.budget_tokens, standpoint=task.standpoint, source="select",
        )  # fmt: skip
        assert selection.trace.memory_sequence == corpus.sequence
        unit = selection.result.bundle.unit_ids()[0]
        labelled.append(trace_label(trace=selection.trace, user=lead, labels={unit: "MUST"}).task)
    assert all(t.memory_sequence == corpus.sequence for t in labelled)
    Task.objects.filter(project=sift, memory_sequence__isnull=True).update(memory_sequence=corpus.sequence)

    target = proposal("looser-stop-rule")
    before = _run(services.backtest_enqueue(proposal=target, requested_by=None, shadow=0))

    # a thousand writes after the labelling: new units on the tasks' own words, supersessions and
    # erasures of those new units (never of a unit the tasks saw)
    rng = random.Random(27)
    words = " ".join(Task.objects.filter(project=sift).values_list("query", flat=True)).split()
    written: list[MemoryUnit] = []
    for step in range(WRITES):
        roll = rng.random()
        text = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
        if written and roll < 0.2:
            old = written.pop(rng.randrange(len(written)))
            written.append(unit_supersede(sift, old, f"live-s{step}", text, day=step % 30, dimension=384))
        elif written and roll < 0.3:
            unit_erase(written.pop(rng.randrange(len(written))), dimension=384)
        else:
            written.append(unit_create(sift, f"live-{step}", text, day=step % 30, dimension=384))
    labelled_at = corpus.sequence
    corpus.refresh_from_db()
    assert corpus.sequence >= labelled_at + WRITES

    again = _run(services.backtest_enqueue(proposal=target, requested_by=None, shadow=0))
    assert again == before  # bundles and traces, byte for byte

    now = services.backtest_enqueue(proposal=target, requested_by=None, shadow=0, memory_now=True)
    assert now.memory_now
    after = _run(now)
    assert set(after) == set(before)
    changed = [pair for pair in before if after[pair] != before[pair]]
    assert changed, "memory as of now should change some selection"
    traces = TaskReplay.objects.filter(backtest=now).values_list("trace__memory_sequence", flat=True)
    assert set(traces) == {corpus.sequence}

    client.force_login(lead)
    first = Backtest.objects.filter(proposal=target, memory_now=False).order_by("id").first()
    assert client.get(reverse("api-1:backtest", args=[now.pk])).json()["memory"] == "now"
    assert client.get(reverse("api-1:backtest", args=[first.pk])).json()["memory"] == "as of each task"
    assert "<strong>as of now</strong>" in client.get(reverse("backtest-detail", args=[now.pk])).content.decode()
    assert "as of each task" in client.get(reverse("backtest-detail", args=[first.pk])).content.decode()
