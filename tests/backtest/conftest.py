"""Backtest fixtures: the context-lab corpus imported for real, users of sift, a real Celery worker.

The worker is a separate process (`celery -A config worker --pool=solo`) on this test run's
queue and test database: it sees only committed rows, so tests that need it are transactional.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTEXT_LAB = ROOT / "fixtures" / "context-lab"
WORKER_START_TIMEOUT = 120


_VECTORS: dict[tuple[str, ...], object] = {}


@pytest.fixture
def context_lab(db, monkeypatch):
    """fixtures/context-lab through corpus_import, with the real model's vectors.

    The vectors of the same texts are computed once per session and handed back on later imports:
    embedding 77 units takes seconds on a small machine, and every test needs a fresh import.
    """
    from selection.memory import embeddings
    from selection.memory.importing import corpus_import

    real = embeddings.embed_texts

    def remembered(texts, batch_size=64, progress=None):
        key = tuple(texts)
        if key not in _VECTORS:
            _VECTORS[key] = real(texts, batch_size=batch_size, progress=progress)
        elif progress is not None:
            progress(len(key))
        return _VECTORS[key]

    monkeypatch.setattr(embeddings, "embed_texts", remembered)
    return corpus_import(CONTEXT_LAB)


@pytest.fixture
def sift(context_lab):
    from selection.models import Project

    return Project.objects.get(slug="sift")


@pytest.fixture
def sift_users(sift, django_user_model):
    """lead, reviewer, auditor of sift (password "pw-<name>"), and an outsider with no role."""
    from authority.models import RoleGrant

    users = {}
    for name in ("lead", "reviewer", "auditor", "outsider"):
        users[name] = django_user_model.objects.create_user(name, password=f"pw-{name}")
        if name != "outsider":
            RoleGrant.objects.create(user=users[name], project=sift, role=name)
    return users


def proposal(uid: str):
    from governance.models import Proposal

    return Proposal.objects.select_related("project", "frame_version", "base_version").get(uid=uid)


def wait_finished(backtest_id: int, timeout: float = 180.0):
    """Poll the database until the backtest is finished or errored; fail with its state if not."""
    from backtest.models import Backtest, BacktestStatus, TaskReplay

    deadline = time.monotonic() + timeout
    while True:
        backtest = Backtest.objects.get(pk=backtest_id)
        if backtest.status in (BacktestStatus.FINISHED, BacktestStatus.ERROR):
            return backtest
        if time.monotonic() > deadline:
            done = TaskReplay.objects.filter(backtest=backtest).count()
            pytest.fail(f"backtest #{backtest_id} still {backtest.status} after {timeout} s ({done} replays)")
        time.sleep(0.2)


def _answers(app, hostname: str) -> bool:
    replies = app.control.inspect(destination=[hostname], timeout=1.0).ping() or {}
    return hostname in replies


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, tmp_path_factory):
    """One real worker process for the test run, on its test database and its own queue."""
    from django.conf import settings
    from django.db import connection

    from config.celery import app

    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    hostname = f"fg-tests-{uuid.uuid4().hex[:8]}@localhost"
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    env = {
        **os.environ,
        "FG_DATABASE_NAME": connection.settings_dict["NAME"],
        "FG_CELERY_QUEUE": queue,
        "FG_QUIET_EMBEDDED": "1",
        # webhooks reach the tests' local receivers (the loopback_webhooks fixture's settings)
        "FG_WEBHOOK_ALLOW_HTTP": "1",
        "FG_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
    }
    command = [
        sys.executable, "-m", "celery", "-A", "config", "worker",
        "--concurrency=1", "--pool=solo", "-Q", queue, f"--hostname={hostname}",
        "--loglevel=WARNING", "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    with open(log, "wb") as out:
        worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + WORKER_START_TIMEOUT
        while not _answers(app, hostname):
            if worker.poll() is not None:
                pytest.fail(f"the Celery worker exited with {worker.returncode}:\n{log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"the Celery worker did not answer a ping in {WORKER_START_TIMEOUT} s")
            time.sleep(0.5)
        yield {"hostname": hostname, "queue": queue, "pid": worker.pid, "log": log}
    finally:
        if worker.poll() is None:
            worker.terminate()  # warm shutdown: the current task finishes
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=10)
