"""The suite across pytest-xdist workers (`make test`): each worker has its own test database
(pytest-django names it), its own redis database for Celery's queues, results and counters, and a
test marked `alone` runs while no other test runs.

Registered for every run by tests/conftest.py (pytest_plugins). The embedded PostgreSQL and redis
are started once, by the process that loads the settings first: the xdist controller, before any
worker exists; the workers find them running.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

# redis's default `databases`; 0 stays for everything outside a parallel run (`make demo`, a worker)
REDIS_DATABASES = 16


def worker_index(config: pytest.Config) -> int | None:
    """This xdist worker's number (gw3: 3), or None outside a parallel run."""
    workerinput = getattr(config, "workerinput", None)
    return None if workerinput is None else int(workerinput["workerid"].removeprefix("gw"))


def redis_url_for_database(url: str, database: int) -> str:
    """The same redis URL (redis://, rediss://, redis+socket://) naming another database."""
    base, _, query = url.partition("?")
    params = [(key, value) for key, value in parse_qsl(query) if key not in ("virtual_host", "db")]
    if urlsplit(url).scheme.endswith("socket"):  # the path is the socket's: the database is a parameter
        params.append(("virtual_host", str(database)))
    else:
        scheme, netloc = urlsplit(url)[:2]
        base = f"{scheme}://{netloc}/{database}"
    return f"{base}?{urlencode(params)}" if params else base


def _own_broker(index: int) -> None:
    """Point this worker's Celery app, and the Celery processes its tests start (they inherit the
    environment), at redis database index + 1: two workers' Celery processes never take each
    other's replays, and the delivery counters keyed by a backtest's id (ids repeat across the
    workers' databases) never meet."""
    from django.conf import settings

    from config.celery import app

    if not settings.CELERY_BROKER_URL.startswith("redis"):
        queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}-gw{index}"
        settings.CELERY_TASK_DEFAULT_QUEUE = app.conf.task_default_queue = queue
        os.environ["FG_CELERY_QUEUE"] = queue
        return
    if index + 1 >= REDIS_DATABASES:
        raise pytest.UsageError(f"at most {REDIS_DATABASES - 1} xdist workers share one redis")
    broker = redis_url_for_database(settings.CELERY_BROKER_URL, index + 1)
    backend = redis_url_for_database(settings.CELERY_RESULT_BACKEND, index + 1)
    settings.CELERY_BROKER_URL = app.conf.broker_url = broker
    settings.CELERY_RESULT_BACKEND = app.conf.result_backend = backend
    os.environ["CELERY_BROKER_URL"] = broker
    if "CELERY_RESULT_BACKEND" in os.environ:
        os.environ["CELERY_RESULT_BACKEND"] = backend


def _reconnect_celery() -> None:
    """Drop this process's pooled broker and result-backend connections: they died with a redis
    that an `alone` test restarted (Celery builds new ones on next use, as in a forked child)."""
    from kombu import pools

    from config.celery import app

    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None
    app.backend.client.connection_pool.disconnect()


class Turns:
    """A test's turn in a parallel run: any number of tests at once, or one `alone` test.

    Two flock(2)ed files shared by the workers: `room`, held shared by each running test and
    exclusively by an `alone` one, and `gate`, taken by an `alone` test while it waits, so that
    no new test enters the room meanwhile (a steady stream of tests could keep it waiting).
    `served` counts the `alone` tests run; a worker that sees it change reconnects to the
    servers they restarted.
    """

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.gate = open(folder / "turns.gate", "a+b")  # noqa: SIM115 - held for the whole run
        self.room = open(folder / "turns.room", "a+b")  # noqa: SIM115
        self.served = folder / "turns.served"
        self.seen = self._served()

    def _served(self) -> str:
        try:
            return self.served.read_text()
        except FileNotFoundError:
            return ""

    @contextmanager
    def shared(self):
        fcntl.flock(self.gate, fcntl.LOCK_EX)
        fcntl.flock(self.room, fcntl.LOCK_SH)
        fcntl.flock(self.gate, fcntl.LOCK_UN)
        try:
            served = self._served()
            if served != self.seen:
                self.seen = served
                _reconnect_celery()
            yield
        finally:
            fcntl.flock(self.room, fcntl.LOCK_UN)

    @contextmanager
    def alone(self):
        fcntl.flock(self.gate, fcntl.LOCK_EX)
        fcntl.flock(self.room, fcntl.LOCK_EX)
        try:
            yield
        finally:
            # this worker reconnects too, on its next turn: an `alone` test need not do it itself
            self.served.write_text(str(int(self._served() or 0) + 1))
            fcntl.flock(self.room, fcntl.LOCK_UN)
            fcntl.flock(self.gate, fcntl.LOCK_UN)


_turns: Turns | None = None


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path_factory exists
def pytest_configure(config: pytest.Config) -> None:
    global _turns
    index = worker_index(config)
    if index is None or not config.pluginmanager.hasplugin("django"):
        return
    from django.conf import settings

    if not settings.configured:
        return
    _own_broker(index)
    # the controller's base temporary directory, shared by its workers
    _turns = Turns(config._tmp_path_factory.getbasetemp().parent / "turns")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """Setup, call and teardown in this test's turn."""
    if _turns is None:
        return (yield)
    turn = _turns.alone() if item.get_closest_marker("alone") else _turns.shared()
    with turn:
        return (yield)
