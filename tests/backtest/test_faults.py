"""Faults with real processes: a worker SIGKILLed in the middle of a backtest loses nothing; a
broker stopped and restarted in the middle of one loses nothing, or the backtest fails visibly and
a lead's re-run completes it.

The killed worker's unacknowledged replay returns to the queue after the broker's visibility
timeout (short here, FG_VISIBILITY_TIMEOUT), at the next sweep of a live worker (every second here,
FG_UNACKED_RESTORE_INTERVAL × FG_UNACKED_RESTORE_THROTTLE); a fresh worker finishes the backtest,
and every task has exactly one replay per side.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from kombu import pools as kombu_pools

from backtest import services
from backtest.models import Backtest, BacktestStatus, TaskReplay

from .conftest import ROOT, WORKER_START_TIMEOUT, _answers, proposal, wait_finished

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

VISIBILITY_TIMEOUT = 8


def start_worker(queue: str, log_path) -> tuple[subprocess.Popen, str]:
    from django.db import connection

    from config.celery import app

    hostname = f"fg-fault-{uuid.uuid4().hex[:8]}@localhost"
    env = {
        **os.environ,
        "FG_DATABASE_NAME": connection.settings_dict["NAME"],
        "FG_CELERY_QUEUE": queue,
        "FG_QUIET_EMBEDDED": "1",
        "FG_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        # kombu sweeps for such messages every 10 × 10 s by default: here every second
        "FG_UNACKED_RESTORE_INTERVAL": "1",
        "FG_UNACKED_RESTORE_THROTTLE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    command = [
        sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency=1", "--pool=solo",
        "-Q", queue, f"--hostname={hostname}", "--loglevel=WARNING", "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    with open(log_path, "ab") as out:
        worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + WORKER_START_TIMEOUT
    while not _answers(app, hostname):
        if worker.poll() is not None:
            pytest.fail(f"worker exited with {worker.returncode}: {open(log_path).read()[-3000:]}")
        if time.monotonic() > deadline:
            worker.kill()
            pytest.fail("worker did not answer a ping")
        time.sleep(0.5)
    return worker, hostname


def stop(worker: subprocess.Popen) -> None:
    if worker.poll() is None:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=10)


def test_a_worker_killed_mid_backtest_loses_nothing(sift, tmp_path):
    from config.celery import app

    queue = f"fg-fault-{uuid.uuid4().hex[:8]}"
    default_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue  # this test's workers only: no other worker steals a replay
    log = tmp_path / "workers.log"
    first, _ = start_worker(queue, log)
    second = None
    try:
        backtest = services.backtest_enqueue(proposal=proposal("all-three"), requested_by=None)
        total = 2 * len(backtest.task_ids)
        deadline = time.monotonic() + 120
        while TaskReplay.objects.filter(backtest=backtest).count() < 3:
            assert time.monotonic() < deadline, "the first worker made no progress"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        at_kill = TaskReplay.objects.filter(backtest=backtest).count()
        assert at_kill < total, "the backtest finished before the worker could be killed"

        second, _ = start_worker(queue, log)
        backtest = wait_finished(backtest.pk, timeout=240)
        assert backtest.status == BacktestStatus.FINISHED, backtest.error
        pairs = list(TaskReplay.objects.filter(backtest=backtest).values_list("task_id", "side"))
        assert len(pairs) == total == len(set(pairs))
        assert {task for task, _side in pairs} == set(backtest.task_ids)
        print(f"\nSIGKILL after {at_kill} of {total} replays; finished with {len(pairs)} replays, none twice")
    finally:
        app.conf.task_default_queue = default_queue
        stop(first)
        if second is not None:
            stop(second)


STALE_SECONDS = 12  # the stale rule's limit in this test: well past a replay's time, well under a minute


@pytest.mark.alone  # it stops the redis that every test shares
def test_a_broker_restarted_mid_backtest_loses_nothing_or_fails_visibly_and_reruns(
    sift, sift_users, tmp_path, settings
):
    """Stop the embedded redis in the middle of a backtest and start it again (it keeps nothing:
    no snapshot, no append-only file). Either the backtest still finishes with exactly one replay
    per task and side, or it is marked failed with its reason and a lead's re-run finishes so."""
    from config import embedded
    from config.celery import app

    settings.FG_BACKTEST_STALE_SECONDS = STALE_SECONDS
    queue = f"fg-fault-{uuid.uuid4().hex[:8]}"
    default_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    log = tmp_path / "workers.log"
    worker, _ = start_worker(queue, log)
    try:
        backtest = services.backtest_enqueue(proposal=proposal("all-three"), requested_by=None)
        total = 2 * len(backtest.task_ids)
        deadline = time.monotonic() + 120
        while TaskReplay.objects.filter(backtest=backtest).count() < 3:
            assert time.monotonic() < deadline, "the worker made no progress"
            time.sleep(0.05)
        embedded.stop_redis()
        at_stop = TaskReplay.objects.filter(backtest=backtest).count()
        time.sleep(2)
        embedded.ensure_redis()
        assert at_stop < total, "the backtest finished before the broker could be stopped"

        deadline = time.monotonic() + 4 * STALE_SECONDS
        while True:  # what a user watching its page sees: it finishes, or it is marked failed
            backtest = services.backtest_fail_if_stale(backtest=Backtest.objects.get(pk=backtest.pk))
            if backtest.status in (BacktestStatus.FINISHED, BacktestStatus.ERROR):
                break
            assert time.monotonic() < deadline, f"still {backtest.status} with no verdict"
            time.sleep(0.5)
        outcome = backtest.status
        if outcome == BacktestStatus.ERROR:
            assert backtest.error, "a failed backtest says why"
            print(f"\nbroker restarted after {at_stop} of {total} replays; failed visibly: {backtest.error}")
            backtest = services.backtest_rerun(backtest=backtest, lead=sift_users["lead"])
            backtest = wait_finished(backtest.pk, timeout=240)
        assert backtest.status == BacktestStatus.FINISHED, backtest.error
        pairs = list(TaskReplay.objects.filter(backtest=backtest).values_list("task_id", "side"))
        assert len(pairs) == total == len(set(pairs))
        assert {task for task, _side in pairs} == set(backtest.task_ids)
        print(f"broker restart: {outcome} first; finished with {len(pairs)} replays, none twice, none lost")
    finally:
        app.conf.task_default_queue = default_queue
        embedded.ensure_redis()
        stop(worker)
        # this process's pooled broker and result-backend connections died with the old redis:
        # drop them, so that later tests connect afresh (a new process would anyway)
        # (kombu's pools.reset empties its registry of pools; Celery then builds new ones on next
        # use, as it does in a forked child)
        kombu_pools.reset()
        app._pool = None
        app.amqp._producer_pool = None
        app.backend.client.connection_pool.disconnect()
