"""Is the service up: the database, the broker, the Celery workers that answer, the embedding model;
is this process live (it answers), and ready (the model and the corpus indexes are loaded, so
that its first request is served at a warm request's speed)."""

from __future__ import annotations

import logging

from django.db import connection
from ninja import Schema

from selection.memory import embeddings, query_encoder
from selection.serving.warm_up import warm_state, warm_up_start

from .celery import app as celery_app

logger = logging.getLogger(__name__)

HEALTH_PING_SECONDS = 0.5


class HealthOut(Schema):
    ok: bool
    database: bool
    broker: bool
    workers: list[str] = []
    model_available: bool
    model_loaded: bool = False


class LiveOut(Schema):
    live: bool


class ReadyOut(Schema):
    ready: bool
    database: bool
    model_loaded: bool
    indexes_loaded: int
    corpora: int
    warm_up_seconds: float | None = None
    error: str | None = None


def site_health() -> dict:
    broker = False
    workers: list[str] = []
    database = _database()
    try:
        with celery_app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        broker = True
        workers = sorted((celery_app.control.inspect(timeout=HEALTH_PING_SECONDS).ping() or {}).keys())
    except Exception:  # noqa: BLE001
        logger.warning("health: the broker did not answer", exc_info=True)
    try:
        available = (embeddings.configured_model_dir() / "config.json").exists()
    except Exception:  # noqa: BLE001
        available = False
    return {
        "ok": database and broker,
        "database": database,
        "broker": broker,
        "workers": workers,
        "model_available": available,
        "model_loaded": _model_loaded(),
    }


def _model_loaded() -> bool:
    return (
        embeddings.get_embedder.cache_info().currsize > 0
        or query_encoder.get_query_encoder.cache_info().currsize > 0
    )


def _database() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:  # noqa: BLE001 - a probe reports, it does not raise
        logger.warning("ready: the database did not answer", exc_info=True)
        return False


def site_ready() -> dict:
    """Ready when the warm-up (started by the server at start, or by this first probe) has loaded
    the query encoder and the corpus indexes and the database answers; a failed warm-up is not
    ready and says why."""
    warm_up_start()
    state = warm_state()
    database = _database()
    return {
        "ready": bool(state["done"] and state["error"] is None and database),
        "database": database,
        "model_loaded": state["model"],
        "indexes_loaded": state["indexes"],
        "corpora": state["corpora"],
        "warm_up_seconds": state["seconds"],
        "error": state["error"],
    }
