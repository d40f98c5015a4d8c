"""Faults under load, with real processes: a web server serving agents' selections while the
embedded PostgreSQL is stopped for 10 s and then redis for 5 s.

While PostgreSQL is down every answer is a quick 503 problem document with Retry-After (nothing
hangs), and selections are served again by themselves once it is back; while redis is down
selections go on (the rate limits let requests through; docs/trust.md).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.db import connection, connections

from tests.selection.test_traces import (
    Lab,
    embedding_cache,  # noqa: F401 - module-wide vectors
)

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.alone, pytest.mark.django_db(transaction=True)]
OUTAGE_SECONDS = 10
SLOWEST_ANSWER = 15.0  # seconds: an answer later than this is a hanging request


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _select(url: str, token: str, query: str) -> tuple[int, str, str, float]:
    body = json.dumps({"project": "tlab", "query": query, "budget_tokens": 130}).encode()
    request = urllib.request.Request(
        f"{url}/api/v1/select", data=body, method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )  # fmt: skip
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers.get("Content-Type", ""), "", time.monotonic() - started
    except urllib.error.HTTPError as refused:
        retry = refused.headers.get("Retry-After", "")
        return refused.code, refused.headers.get("Content-Type", ""), retry, time.monotonic() - started
    except (urllib.error.URLError, OSError):
        return 0, "", "", time.monotonic() - started


def test_selections_survive_postgresql_and_redis_outages(tmp_path, django_user_model):
    from authority.models import RoleGrant
    from config import embedded
    from governance.tokens import services as tokens

    lab = Lab(tmp_path)
    lead = django_user_model.objects.create_user("outage-lead")
    RoleGrant.objects.create(user=lead, project=lab.project, role="lead")
    token = tokens.token_create(user=lead, name="agent", project=lab.project, role="lead").secret
    started_before = set(embedded.started_here)  # the servers this run stops at its end
    port = _free_port()
    env = {**os.environ, "FG_DATABASE_NAME": connection.settings_dict["NAME"], "FG_QUIET_EMBEDDED": "1"}
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    answers: list[tuple[float, int, str, str, float]] = []
    stop = threading.Event()

    def agent():
        while not stop.is_set():
            status, kind, retry, took = _select(url, token, lab.task.query)
            answers.append((time.monotonic(), status, kind, retry, took))
            if status != 200:
                time.sleep(0.2)

    try:
        deadline = time.monotonic() + 180  # the first selection loads the model
        while _select(url, token, lab.task.query)[0] != 200:
            assert time.monotonic() < deadline and server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            time.sleep(1)
        agents = [threading.Thread(target=agent) for _ in range(2)]
        for thread in agents:
            thread.start()
        time.sleep(3)
        connections.close_all()
        down_at = time.monotonic()
        embedded.stop_postgres()
        time.sleep(OUTAGE_SECONDS)
        embedded.ensure_postgres()
        up_at = time.monotonic()
        time.sleep(5)
        embedded.stop_redis()
        redis_down = time.monotonic()
        time.sleep(5)
        embedded.ensure_redis()
        redis_up = time.monotonic()
        time.sleep(2)
        stop.set()
        for thread in agents:
            thread.join(90)
    finally:
        stop.set()
        embedded.ensure_postgres()
        embedded.ensure_redis()
        embedded.started_here.intersection_update(started_before)
        server.terminate()
        server.wait(30)
        log.close()
        connections.close_all()

    during = [a for a in answers if down_at + 1 < a[0] - a[4] and a[0] < up_at]
    assert during, "no request was answered while PostgreSQL was down"
    assert all(status == 503 for _, status, *_ in during), sorted({a[1] for a in during})
    assert all(kind.startswith("application/problem+json") and retry == "5" for _, _, kind, retry, _ in during)
    assert max(a[4] for a in answers) < SLOWEST_ANSWER, "a request hung"
    after = [a for a in answers if a[0] - a[4] > up_at + 2 and a[0] < redis_down]
    assert after and all(a[1] == 200 for a in after), "selections did not resume once PostgreSQL was back"
    without_redis = [a for a in answers if redis_down + 0.5 < a[0] - a[4] and a[0] < redis_up]
    assert without_redis and all(a[1] == 200 for a in without_redis), sorted({a[1] for a in without_redis})
    print(
        f"\noutage: {len(answers)} selections; {len(during)} answered 503 while PostgreSQL was down "
        f"{OUTAGE_SECONDS} s, {len(after)} served after, {len(without_redis)} served without redis; "
        f"slowest answer {max(a[4] for a in answers):.1f} s"
    )
