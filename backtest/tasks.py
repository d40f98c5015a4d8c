"""Celery tasks of a backtest: thin, they take ids and call one service; retries live here.

One replay_chunk per chunk of (task, side) pairs (dispatch.replay_chunks) and one shadow_task per
recorded selection, gathered by a chord whose callback judges the gates. Replays are idempotent
(replay.replay_many), so a retried or redelivered chunk (acks_late) writes nothing twice.
"""

from __future__ import annotations

from celery import shared_task
from celery.concurrency.solo import TaskPool as SoloPool
from celery.signals import worker_process_init, worker_ready
from django.conf import settings
from django.db import InterfaceError, OperationalError

from rules.gate_verdict import GateSpecError
from selection.memory import embeddings

from . import judging
from .errors import BacktestError
from .health import services as health
from .replay import dispatch, shadow
from .replay import services as replay

RETRIED = (OperationalError, InterfaceError)


# the options of every replay task (a task's replay and a recorded selection's shadow replay)
REPLAY_OPTIONS = dict(
    bind=True,
    autoretry_for=RETRIED,
    retry_backoff=0.5,
    retry_backoff_max=10,
    max_retries=5,
    acks_late=True,
    # a worker that dies mid-replay puts the message back for another worker ...
    reject_on_worker_lost=True,
    # ... and one replay never holds a worker past these (SoftTimeLimitExceeded, then SIGKILL)
    soft_time_limit=settings.FG_REPLAY_SOFT_TIME_LIMIT,
    time_limit=settings.FG_REPLAY_TIME_LIMIT,
)


@shared_task(name=dispatch.REPLAY_CHUNK_TASK, **REPLAY_OPTIONS)
def replay_chunk(self, backtest_id: int, pairs: list[list]) -> int | None:
    """Many (task, side) pairs replayed and written in one transaction; returns how many."""
    pairs = [(int(task_id), str(side)) for task_id, side in pairs]
    if not judging.chunk_delivery_allowed(
        self.app, backtest_id=backtest_id, pairs=pairs, retries=self.request.retries
    ):
        return None
    return len(replay.replay_many(backtest_id=backtest_id, pairs=pairs))


@shared_task(name=dispatch.SHADOW_TASK, **REPLAY_OPTIONS)
def shadow_task(self, backtest_id: int, trace_id: int) -> int | None:
    """One recorded selection replayed under both versions (shadow.shadow_one)."""
    if not judging.replay_delivery_allowed(
        self.app, backtest_id=backtest_id, task_id=trace_id, side="shadow", retries=self.request.retries
    ):
        return None
    return shadow.shadow_one(backtest_id=backtest_id, trace_id=trace_id).pk


@shared_task(
    name=dispatch.FINISH_TASK,
    autoretry_for=RETRIED,
    retry_backoff=0.5,
    max_retries=5,
    acks_late=True,
)
def finish_backtest(results, backtest_id: int) -> bool | None:
    try:
        return judging.backtest_finish(backtest_id=backtest_id).passed
    except (BacktestError, GateSpecError) as error:
        judging.backtest_fail(backtest_id=backtest_id, error=str(error))
        return None


@shared_task(name=dispatch.FAIL_TASK, autoretry_for=RETRIED, max_retries=5, acks_late=True)
def fail_backtest(backtest_id: int) -> None:
    """The chord's errback: a replay failed for good, so the backtest cannot be judged."""
    judging.backtest_fail(backtest_id=backtest_id, error="a task replay failed after its retries")


@shared_task(name=health.HEALTH_TASK, autoretry_for=RETRIED, retry_backoff=0.5, max_retries=5, acks_late=True)
def frame_health(project_id: int, trigger: str, key: str, requested_by_id: int | None = None) -> int | None:
    """One reading of a project's promoted frame (health.health_check; idempotent per key)."""
    return health.health_check_by_id(
        project_id=project_id, trigger=trigger, key=key, requested_by_id=requested_by_id
    )


@shared_task(name=health.DAILY_TASK)
def frame_health_daily(day: str | None = None) -> list[int]:
    """The beat entry "frame-health": queue a reading of every project with tasks, once a day."""
    return health.health_schedule(day=day)


# A replay's time limit must not pay for loading the embedding model: a cold worker's first replay
# took 68 s to load it on a loaded two-core machine, past the 60 s soft limit, and failed its
# backtest. Each process that runs replays loads it on a thread as soon as it starts.


@worker_process_init.connect
def _warm_pool_process(**kwargs) -> None:  # a prefork child: returns at once (the pool waits ~4 s)
    embeddings.warm_in_background()


@worker_ready.connect
def _warm_solo_worker(sender=None, **kwargs) -> None:  # --pool=solo: replays run in this process
    if isinstance(getattr(sender, "pool", None), SoloPool):
        embeddings.warm_in_background()
