"""Backtest throughput: task replays per second through backtest.services.replay_many in forked
worker processes (what a Celery worker with --concurrency=N runs), the backtest's pairs cut into
the chunks launch_chord sends (services.replay_chunks), each chunk's traces and rows written in
one transaction.
"""

from __future__ import annotations

import multiprocessing
import time

from django.db import connections

from authority.models import FrameVersion
from backtest.models import Backtest, BacktestStatus, TaskReplay
from backtest.replay import dispatch
from backtest.replay import services as replay_services
from bench.database import StoredBench
from selection.engine.pipeline import ENGINE_VERSION
from selection.evaluation.task_sets import task_set_digest
from selection.models import Task


def _replay_worker(backtest_id: int, chunks: list, reuse: bool, ready, go, results) -> None:
    ready.wait()
    go.wait()
    begun = time.perf_counter()
    replays = 0
    for chunk in chunks:
        replay_services.replay_many(backtest_id=backtest_id, pairs=chunk, reuse_baseline=reuse)
        replays += len(chunk)
    results.put((replays, time.perf_counter() - begun))
    connections.close_all()


def time_backtest(stored: StoredBench, workers: int, *, reuse: bool = False) -> dict:
    """Replays of every (task, side) of the stored first project, its chunks spread over `workers`
    processes. `reuse` False (the throughput figure) selects every baseline pair again; True lets
    baseline pairs name an earlier backtest's replay with the same inputs (backtest.replay.reuse), as a
    second proposal's backtest against the same baseline does."""
    project = stored.project
    tasks = list(Task.objects.filter(project=project).order_by("position", "id"))
    baseline = FrameVersion.objects.get(project=project, number=1)
    backtest = Backtest.objects.create(
        proposal=stored.proposal, baseline_version=baseline,
        candidate_version=stored.proposal.frame_version, condition="C6",
        task_ids=[t.pk for t in tasks],
        task_set_digest=task_set_digest(project=project),
        engine_version=ENGINE_VERSION, gates={}, status=BacktestStatus.QUEUED,
    )
    # a worker that has run a while: index built, queries embedded, rows cached (inherited by fork)
    replay_services.backtest_warm(backtest_id=backtest.pk)
    chunks = dispatch.replay_chunks(backtest)
    connections.close_all()
    context = multiprocessing.get_context("fork")
    ready, go = context.Barrier(workers + 1), context.Barrier(workers + 1)
    results = context.Queue()
    procs = [
        context.Process(
            target=_replay_worker, args=(backtest.pk, chunks[w::workers], reuse, ready, go, results)
        )
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    ready.wait()
    begun = time.perf_counter()
    go.wait()
    done = [results.get(timeout=1800) for _ in procs]
    wall = time.perf_counter() - begun
    for proc in procs:
        proc.join()
    replays = sum(n for n, _ in done)
    # baseline replays that name an earlier backtest's trace (reuse)
    reused = TaskReplay.objects.filter(
        backtest=backtest, side="baseline", trace__created_at__lt=backtest.created_at
    ).count()
    return {
        "replays": replays,
        "chunks": len(chunks),
        "chunk_size": max(len(c) for c in chunks),
        "baseline_reused": reused,
        "wall_s": round(wall, 3),
        "replays_per_s": round(replays / wall, 1),
        "per_worker": round(replays / wall / workers, 1),
        # what one replay costs one worker, to set beside one bare C6 selection
        "ms_per_replay_per_worker": round(1000 * wall * workers / replays, 3),
        "implementation": "backtest.services.replay_many over replay_chunks in forked worker processes",
    }
