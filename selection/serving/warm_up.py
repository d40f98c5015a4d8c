"""A serving process loads what its first request would otherwise wait for: the query encoder and
every corpus's index (up to the index cache's size, the most recent kept). The readiness probe
(config/site_health.py) answers ready only when this is done."""

from __future__ import annotations

import logging
import threading
import time

from django.db import connection

from selection.memory import live_index, query_encoder, store
from selection.models import Corpus

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_state: dict = {
    "started": False, "done": False, "error": None, "model": False,
    "indexes": 0, "corpora": 0, "seconds": None,
}  # fmt: skip
_thread: threading.Thread | None = None


def warm_state() -> dict:
    with _lock:
        return dict(_state)


def _warm() -> None:
    started = time.perf_counter()
    try:
        query_encoder.encode_query("warm-up")
        with _lock:
            _state["model"] = True
        corpora = list(Corpus.objects.order_by("pk").values_list("pk", flat=True))
        with _lock:
            _state["corpora"] = len(corpora)
        for corpus_id in corpora[-live_index.CORPORA_KEPT :]:  # the most recent that each process keeps
            store.corpus_index(corpus_id)
            with _lock:
                _state["indexes"] += 1
    except Exception as error:  # noqa: BLE001 - reported by the readiness probe, and logged
        logger.exception("warm-up failed")
        with _lock:
            _state["error"] = f"{error.__class__.__name__}: {error}"
    finally:
        connection.close()  # this thread's connection
        with _lock:
            _state["done"] = True
            _state["seconds"] = round(time.perf_counter() - started, 2)


def warm_up_start() -> threading.Thread:
    """Start the warm-up on a daemon thread, once per process; later calls return that thread,
    or start it again after a failed one (the database was not up yet, say)."""
    global _thread
    with _lock:
        if _thread is None or (_state["done"] and _state["error"] is not None):
            _state.update(started=True, done=False, error=None, model=False, indexes=0, seconds=None)
            _thread = threading.Thread(target=_warm, name="serving-warm-up", daemon=True)
            _thread.start()
        return _thread
