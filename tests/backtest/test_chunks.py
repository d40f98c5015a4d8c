"""Replays in chunks: a Celery task replays many (task, side) pairs and writes them in
one transaction, each pair once however often its chunk is delivered; a later backtest against
the same baseline reuses the baseline replays; the traces written so read, diff and verify as
before. Inline on the real PostgreSQL (the worker's own run is in test_worker.py)."""

from __future__ import annotations

import hashlib

import psycopg
import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from backtest import judging, services
from backtest import selectors as backtest_selectors
from backtest.models import AblationReplay, Backtest, BacktestStatus, TaskReplay
from backtest.replay import dispatch
from backtest.replay import services as replays
from selection.engine.serialisation import to_jsonable
from selection.memory import store
from selection.models import MemoryUnit, Trace, TraceCandidate
from selection.traces import chain
from selection.traces.chain import canonical, content_digest, verify_chain

from .conftest import proposal

pytestmark = pytest.mark.django_db


def every_pair(backtest: Backtest) -> list[tuple[int, str]]:
    return [(t, side) for t in backtest.task_ids for side in dispatch.replay_sides(backtest)]


def run_in_chunks(backtest: Backtest, **kwargs) -> None:
    for chunk in dispatch.replay_chunks(backtest):
        replays.replay_many(backtest_id=backtest.pk, pairs=chunk, **kwargs)


def rows_of(backtest: Backtest) -> dict[tuple[int, str], dict]:
    return {
        (task_id, side): metrics
        for task_id, side, metrics in TaskReplay.objects.filter(backtest=backtest).values_list(
            "task_id", "side", "metrics"
        )
    }


def decision_of(backtest: Backtest) -> dict:
    decision = judging.backtest_finish(backtest_id=backtest.pk)
    return {
        "passed": decision.passed,
        "gates": decision.gate_results,
        "baseline": decision.baseline_means,
        "candidate": decision.candidate_means,
        "per_task": [{k: v for k, v in row.items()} for row in decision.per_task_deltas],
        "ablation": decision.ablation,
    }


def test_the_chunks_cover_every_pair_once_and_spread_a_small_backtest(sift, settings):
    backtest = services.backtest_enqueue(proposal=proposal("all-three"), requested_by=None)
    sides = dispatch.replay_sides(backtest)
    assert len(sides) > 2  # all-three is ablated: its variants are sides too
    chunks = dispatch.replay_chunks(backtest)
    flat = [pair for chunk in chunks for pair in chunk]
    assert sorted(flat) == sorted(every_pair(backtest)) and len(set(flat)) == len(flat)
    assert len(chunks) >= settings.FG_BACKTEST_MIN_CHUNKS
    assert max(len(c) for c in chunks) <= settings.FG_BACKTEST_CHUNK
    settings.FG_BACKTEST_CHUNK, settings.FG_BACKTEST_MIN_CHUNKS = 3, 1
    assert [len(c) for c in dispatch.replay_chunks(backtest)][:2] == [3, 3]


def test_a_chunk_writes_its_pairs_in_one_transaction_and_a_redelivery_writes_nothing(sift):
    backtest = services.backtest_enqueue(proposal=proposal("all-three"), requested_by=None)
    chunk = every_pair(backtest)[:9]  # three tasks on every side, the ablation variants included
    traces = Trace.objects.count()
    with CaptureQueriesContext(connection) as queries:
        rows = replays.replay_many(backtest_id=backtest.pk, pairs=chunk)
    assert [(r.task_id, r.side if isinstance(r, TaskReplay) else f"ablation-{r.variant}") for r in rows] == chunk
    inserted = [q["sql"].split('"')[1] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    # one insert of the trace headers, one per kind of replay row (the candidates go by COPY)
    assert inserted == ["selection_trace", "backtest_taskreplay", "backtest_ablationreplay"]
    traced = [p for p in chunk if p[1] in ("baseline", "candidate")]
    assert Trace.objects.count() == traces + len(traced)
    assert TaskReplay.objects.filter(backtest=backtest).count() == len(traced)
    assert AblationReplay.objects.filter(backtest=backtest).count() == len(chunk) - len(traced)
    assert Backtest.objects.get(pk=backtest.pk).status == BacktestStatus.RUNNING

    # the same chunk delivered again (acks_late), and a chunk overlapping it: nothing twice
    with CaptureQueriesContext(connection) as queries:
        again = replays.replay_many(backtest_id=backtest.pk, pairs=chunk)
    assert [r.pk for r in again] == [r.pk for r in rows]
    assert not [q for q in queries.captured_queries if q["sql"].startswith(("INSERT", "UPDATE", "COPY"))]
    overlapping = every_pair(backtest)[6:12]
    replays.replay_many(backtest_id=backtest.pk, pairs=overlapping)
    assert TaskReplay.objects.filter(backtest=backtest).count() == len(
        [p for p in every_pair(backtest)[:12] if p[1] in ("baseline", "candidate")]
    )


def test_a_chunk_that_fails_in_its_write_is_retried_and_writes_each_pair_once(sift):
    """A chunk whose transaction fails (here: another writer holds the backtest's lock past our
    lock_timeout, an OperationalError Celery retries) leaves nothing behind, and its retry writes
    every pair once."""
    backtest = services.backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=None)
    chunk = every_pair(backtest)[:6]
    traces = Trace.objects.count()
    settings = connection.settings_dict
    blocker = psycopg.connect(
        dbname=settings["NAME"], user=settings["USER"], password=settings["PASSWORD"] or None,
        host=settings["HOST"] or None, port=settings["PORT"] or None, autocommit=True,
    )  # fmt: skip
    try:
        blocker.execute("SELECT pg_advisory_lock(%s, %s)", [replays.REPLAY_LOCK_CLASS, backtest.pk])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '300ms'")
        with pytest.raises(OperationalError):
            replays.replay_many(backtest_id=backtest.pk, pairs=chunk)
        assert Trace.objects.count() == traces
        assert not TaskReplay.objects.filter(backtest=backtest).exists()
    finally:
        blocker.close()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    rows = replays.replay_many(backtest_id=backtest.pk, pairs=chunk)
    assert len(rows) == len(chunk) == dispatch.replays_done(Backtest.objects.get(pk=backtest.pk))
    traced = [p for p in chunk if p[1] in ("baseline", "candidate")]
    assert TaskReplay.objects.filter(backtest=backtest).count() == len(traced)
    assert Trace.objects.count() == traces + len(traced)


def test_a_chunked_backtest_judges_as_one_replay_at_a_time_does(sift):
    one_by_one = services.backtest_enqueue(proposal=proposal("all-three"), requested_by=None)
    for task_id, side in every_pair(one_by_one):
        replays.replay_many(backtest_id=one_by_one.pk, pairs=[(task_id, side)], reuse_baseline=False)
    chunked = services.backtest_enqueue(proposal=proposal("all-three"), requested_by=None)
    run_in_chunks(chunked, reuse_baseline=False)
    assert dispatch.replays_done(chunked) == dispatch.replays_expected(chunked) - len(chunked.shadow.get("traces", []))
    assert decision_of(chunked) == decision_of(one_by_one)
    assert rows_of(chunked) == rows_of(one_by_one)
    assert not verify_chain(sift).broken


def test_a_later_backtest_reuses_the_baseline_replays_and_judges_the_same(sift):
    first = services.backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=None)
    run_in_chunks(first)
    baseline_traces = dict(
        TaskReplay.objects.filter(backtest=first, side="baseline").values_list("task_id", "trace_id")
    )
    traces = Trace.objects.count()

    # another proposal of sift against the same baseline, tasks and corpus
    second = services.backtest_enqueue(proposal=proposal("protocol-in-config-repair"), requested_by=None)
    run_in_chunks(second)
    reused = dict(TaskReplay.objects.filter(backtest=second, side="baseline").values_list("task_id", "trace_id"))
    assert reused == baseline_traces  # the baseline side names the first backtest's traces
    assert Trace.objects.count() == traces + len(second.task_ids)  # only the candidate side was traced
    # ... and judges exactly as the same backtest replayed in full
    full = services.backtest_enqueue(proposal=proposal("protocol-in-config-repair"), requested_by=None)
    run_in_chunks(full, reuse_baseline=False)
    assert rows_of(second) == rows_of(full)
    assert decision_of(second) == decision_of(full)
    # the reused trace's page links back to the backtest that made it
    assert backtest_selectors.trace_origin(Trace.objects.get(pk=next(iter(reused.values())))).label.startswith(
        f"backtest #{first.pk} "
    )


def test_a_changed_corpus_replays_the_baseline_again(sift, sift_users):
    from selection.memory.erasure import unit_erase

    first = services.backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=None)
    run_in_chunks(first)
    earlier = set(TaskReplay.objects.filter(backtest=first, side="baseline").values_list("trace_id", flat=True))
    admitted = Trace.objects.get(pk=min(earlier)).admitted[0]
    unit_erase(unit=MemoryUnit.objects.get(uid=admitted, project=sift), lead=sift_users["lead"], reason="asked to")

    second = services.backtest_enqueue(proposal=proposal("protocol-in-config-repair"), requested_by=None)
    run_in_chunks(second)
    now = set(TaskReplay.objects.filter(backtest=second, side="baseline").values_list("trace_id", flat=True))
    assert not now & earlier  # every baseline pair selected again over the changed corpus
    assert len(now) == len(second.task_ids)


def test_a_chunk_written_trace_reads_back_renders_and_digests_as_before(sift, client, sift_users):
    backtest = services.backtest_enqueue(proposal=proposal("looser-stop-rule"), requested_by=None)
    replay = replays.replay_many(backtest_id=backtest.pk, pairs=every_pair(backtest)[:2])[1]
    trace = replay.trace
    # the stored trace is the selection, field for field: the same selection run again equals it
    context = replays._task_context(replay.task_id)
    _number, frame = store.frame_of_version(backtest.candidate_version_id)
    again, _index = replays._select(context, frame, "C6", store.corpus_index(context.task.corpus_id))
    stored = store.trace_result(trace)
    assert to_jsonable(stored.trace) == to_jsonable(again.trace)
    assert stored.bundle.digest == again.bundle.digest
    # the digest put together part by part is the SHA-256 of the whole document's canonical text
    rows = list(TraceCandidate.objects.filter(trace=trace).order_by("position").values())
    fields = Trace.objects.filter(pk=trace.pk).values().get()
    whole = {
        "trace": {name: chain._plain(fields[name]) for name in chain._TRACE_FIELDS},
        "candidates": [{name: row[name] for name in chain._CANDIDATE_FIELDS} for row in rows],
    }
    expected = hashlib.sha256(canonical(whole).encode("utf-8")).hexdigest()
    assert content_digest(fields, rows) == expected
    assert content_digest(fields, rows, [canonical(r["record"]) for r in rows]) == expected
    assert chain.link_digest(expected, trace.previous_digest) == trace.digest
    # each record went from the engine's dataclasses straight to its canonical text, the very text
    # of its JSON form, and the json column keeps that text as it was sent
    texts = [chain.canonical_engine(c) for c in again.trace.candidates]
    assert texts == [canonical(to_jsonable(c)) for c in again.trace.candidates]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT record::text FROM selection_tracecandidate WHERE trace_id = %s ORDER BY position", [trace.pk]
        )
        assert [text for (text,) in cursor.fetchall()] == texts
    assert not verify_chain(sift).broken
    client.force_login(sift_users["auditor"])
    page = client.get(reverse("trace-detail", args=[trace.pk]))
    assert page.status_code == 200 and rows[0]["unit_uid"] in page.content.decode()
    diff = client.get(reverse("trace-diff"), {"a": backtest_trace(backtest, "baseline"), "b": trace.pk})
    assert diff.status_code == 200


def backtest_trace(backtest: Backtest, side: str) -> int:
    return TaskReplay.objects.filter(backtest=backtest, side=side).values_list("trace_id", flat=True).first()
