"""Backtest throughput: task replays per second through backtest.services.replay_one in forked
worker processes (what a Celery worker with --concurrency=N runs), each replay writing its trace
and metrics.
"""

from __future__ import annotations

import multiprocessing
import time

from django.db import connections

from authority.models import FrameVersion
from backtest import services as backtest_services
from backtest.models import Backtest, BacktestStatus, ReplaySide
from backtest.taskset import task_set_digest
from selection.engine.pipeline import ENGINE_VERSION
from selection.models import Task

from .database import StoredBench


def _replay_worker(backtest_id: int, pairs: list[tuple[int, str]], ready, go, results) -> None:
    ready.wait()
    go.wait()
    begun = time.perf_counter()
    for task_id, side in pairs:
        backtest_services.replay_one(backtest_id=backtest_id, task_id=task_id, side=side)
    results.put((len(pairs), time.perf_counter() - begun))
    connections.close_all()


def time_backtest(stored: StoredBench, workers: int) -> dict:
    """Replays of every (task, side) of the stored first project, spread over `workers` processes."""
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
    backtest_services.backtest_warm(backtest_id=backtest.pk)
    pairs = [(t.pk, side) for t in tasks for side in ReplaySide.values]
    connections.close_all()
    context = multiprocessing.get_context("fork")
    ready, go = context.Barrier(workers + 1), context.Barrier(workers + 1)
    results = context.Queue()
    procs = [
        context.Process(
            target=_replay_worker, args=(backtest.pk, pairs[w::workers], ready, go, results)
        )
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    ready.wait()
    begun = time.perf_counter()
    go.wait()
    done = [results.get(timeout=600) for _ in procs]
    wall = time.perf_counter() - begun
    for proc in procs:
        proc.join()
    replays = sum(n for n, _ in done)
    return {
        "replays": replays,
        "wall_s": round(wall, 3),
        "replays_per_s": round(replays / wall, 1),
        "per_worker": round(replays / wall / workers, 1),
        "implementation": "backtest.services.replay_one in forked worker processes",
    }
