"""A serving process is live at once and ready only when the model and the corpus indexes are
loaded; `select` is served by the running server when one is ready (the same output, the same exit
statuses, saying so under --explain) and in its own process otherwise; the local command channel
runs nothing for a request that is not this installation's, fresh and signed."""

from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.request

import pytest
from django.core.management import CommandError, call_command

from selection.serving import server_client
from tests.backtest.conftest import context_lab  # noqa: F401 - the fixture corpus

pytestmark = pytest.mark.django_db(transaction=True)


def ready(base: str) -> dict:
    """Poll the readiness probe until it answers 200 (the warm-up runs on its thread)."""
    deadline = time.monotonic() + 300
    while True:
        try:
            with urllib.request.urlopen(base + "/api/v1/health/ready", timeout=30) as response:
                return {"status": response.status, **json.loads(response.read())}
        except urllib.error.HTTPError as not_ready:
            assert not_ready.code == 503, not_ready.code
            body = json.loads(not_ready.read())
            assert body["ready"] is False and body["error"] is None, body
        assert time.monotonic() < deadline, "never ready"
        time.sleep(0.2)


def test_live_at_once_ready_when_loaded(client, context_lab):  # noqa: F811
    live = client.get("/api/v1/health/live")
    assert live.status_code == 200 and live.json() == {"live": True}
    answer = client.get("/api/v1/health/ready")
    assert answer.status_code in (200, 503)
    deadline = time.monotonic() + 300
    while answer.status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
        answer = client.get("/api/v1/health/ready")
    body = answer.json()
    assert answer.status_code == 200, body
    assert body["ready"] and body["database"] and body["model_loaded"]
    # every corpus there was when this process warmed up (an earlier test's server may have)
    assert body["indexes_loaded"] == body["corpora"]


def _select(*args, **env) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command("select", *args, stdout=out, stderr=io.StringIO())
        return out.getvalue(), 0
    except CommandError as error:
        return f"{out.getvalue()}!{error}", error.returncode


def test_select_is_served_by_the_running_server_with_the_same_output(
    context_lab, live_server, monkeypatch, tmp_path  # noqa: F811
):
    assert ready(live_server.url)["status"] == 200
    signals = tmp_path / "signals.json"
    signals.write_text(json.dumps([{"id": "s1", "kind": "failing_test", "content": "tokenizer IndexError"}]))
    request = ("--project", "sift", "--query", "how are retries handled", "--signals", str(signals))

    monkeypatch.setenv("FG_SERVER_URL", live_server.url)
    there, status = _select(*request, "--json")
    assert status == 0
    explained, _ = _select(*request, "--explain")
    monkeypatch.setenv("FG_SERVER_URL", "")
    here, status_here = _select(*request, "--json")
    explained_here, _ = _select(*request, "--explain")

    there, here = json.loads(there), json.loads(here)
    assert there["trace_id"] != here["trace_id"]  # each wrote its trace, in the same database
    assert there["bundle"] == here["bundle"] and status_here == 0
    assert there["trace"]["candidates"] == here["trace"]["candidates"]
    assert explained.rstrip().endswith(f"Served: by the running server at {live_server.url.split('//')[1]}")
    assert explained_here.rstrip().endswith("Served: in this process (FG_SERVER_URL is empty)")
    assert explained.split("\nServed:")[0].split("trace ")[0] == explained_here.split("\nServed:")[0].split("trace ")[0]

    # the same exit statuses and messages: a missing project (1), an unknown work type (2)
    for args in (("--project", "nowhere", "--query", "x"), ("--project", "sift", "--query", "x", "--work-type", "no")):
        monkeypatch.setenv("FG_SERVER_URL", live_server.url)
        served = _select(*args)
        monkeypatch.setenv("FG_SERVER_URL", "")
        assert served == _select(*args)
        assert served[1] in (1, 2) and served[0].startswith("!")


def test_no_server_answering_means_this_process(context_lab, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FG_SERVER_URL", "http://127.0.0.1:9")  # the discard port: nothing listens
    out, status = _select("--project", "sift", "--query", "how are retries handled", "--explain")
    assert status == 0
    assert "Served: in this process (no server answered at http://127.0.0.1:9" in out


def _post(base: str, body: bytes, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(base + server_client.CHANNEL_PATH, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def _signed(body: dict, *, nonce: str = "n" * 32, stamp: int | None = None, key_body: bytes | None = None):
    raw = json.dumps(body).encode()
    stamp_text = str(int(time.time()) if stamp is None else stamp)
    headers = {
        server_client.HEADER_TIME: stamp_text,
        server_client.HEADER_NONCE: nonce,
        server_client.HEADER_SIGNATURE: server_client.signature(key_body or raw, stamp_text, nonce),
        "Content-Type": "application/json",
    }
    return raw, headers


def test_the_channel_runs_nothing_unsigned_stale_replayed_foreign_or_unlisted(context_lab, live_server):  # noqa: F811
    from selection.models import Trace

    base = live_server.url
    assert ready(base)["status"] == 200
    request = {
        "command": "select",
        "options": {"project": "sift", "query": "retries", "json": True},
        "files": {},
        "database": server_client.database_identity(),
    }
    before = Trace.objects.count()
    raw, headers = _signed(request)
    assert _post(base, raw, {"Content-Type": "application/json"})[0] == 403  # unsigned
    assert _post(base, raw, {**headers, server_client.HEADER_SIGNATURE: "0" * 64})[0] == 403  # forged
    stale, stale_headers = _signed(request, nonce="s" * 32, stamp=int(time.time()) - 120)
    assert _post(base, stale, stale_headers)[0] == 403
    tampered, tampered_headers = _signed(request, nonce="t" * 32, key_body=b"another body")
    assert _post(base, tampered, tampered_headers)[0] == 403
    foreign, foreign_headers = _signed({**request, "database": '["elsewhere", "", "other"]'}, nonce="f" * 32)
    assert _post(base, foreign, foreign_headers)[0] == 409
    unlisted, unlisted_headers = _signed({**request, "command": "erase_unit"}, nonce="u" * 32)
    assert _post(base, unlisted, unlisted_headers)[0] == 400
    assert Trace.objects.count() == before  # nothing ran

    status, answer = _post(base, raw, headers)
    assert status == 200 and answer["returncode"] == 0, answer
    assert json.loads(answer["stdout"])["bundle"]["items"]
    assert _post(base, raw, headers) == (403, {"detail": "replayed request"})
    assert Trace.objects.count() == before + 1
