"""Is the service up: the database, the broker, the Celery workers that answer, the embedding model."""

from __future__ import annotations

import logging

from django.db import connection
from ninja import Schema

from selection.memory import embeddings

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


def site_health() -> dict:
    database = broker = False
    workers: list[str] = []
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        database = True
    except Exception:  # noqa: BLE001 - a health check reports, it does not raise
        logger.warning("health: the database did not answer", exc_info=True)
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
        "model_loaded": embeddings.get_embedder.cache_info().currsize > 0,
    }
