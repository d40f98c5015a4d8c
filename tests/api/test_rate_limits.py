"""Rate limits per token and per user: past a limit the API answers 429 problem details with
Retry-After and writes nothing; under it, requests are served; the MCP server counts the same
limits; without redis a request is let through (the limits guard capacity, not correctness)."""

from __future__ import annotations

import uuid

import anyio
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from mcp import Client

from selection.models import Job, Trace, TraceOutcome
from tests.api.conftest import API, assert_problem

pytestmark = pytest.mark.django_db

FAILING = [{"id": "t1", "kind": "failing_test", "content": "test_smoke_retrieval fails after the config change"}]
SELECT = {"project": "sift", "signals": FAILING, "budget_tokens": 300}


@pytest.fixture
def limits(settings):
    """Small limits under a key prefix of this test's own (counters of other tests never meet)."""
    settings.FG_RATE_KEY_PREFIX = f"fg-rate-test-{uuid.uuid4().hex}"
    configured = {kind: {"token": "1000/60", "user": "1000/60"} for kind in settings.FG_RATE_LIMITS}
    settings.FG_RATE_LIMITS = configured

    def set_limit(kind: str, *, token: str = "1000/60", user: str = "1000/60"):
        settings.FG_RATE_LIMITS = {**settings.FG_RATE_LIMITS, kind: {"token": token, "user": user}}

    return set_limit


def _refused(response, kind: str, scope: str, seconds: int = 60) -> dict:
    doc = assert_problem(response, 429)
    assert (
        doc["type"].endswith("/rate-limited") and f"{kind} limit" in doc["detail"] and f"this {scope}" in doc["detail"]
    )
    assert 1 <= int(response["Retry-After"]) <= seconds
    return doc


def test_a_token_over_its_select_limit_gets_429_with_retry_after_and_no_trace(limits, api, people, token_for):
    limits("select", token="2/60")
    agent = api(token_for(people["lead"], "sift", "lead"))
    assert [agent.post("/select", SELECT).status_code for _ in range(2)] == [200, 200]
    traces = Trace.objects.count()
    _refused(agent.post("/select", SELECT), "select", "token")
    assert Trace.objects.count() == traces  # nothing written
    # the limit is the token's: another token of the same user is served
    assert api(token_for(people["lead"], "sift", "lead")).post("/select", SELECT).status_code == 200


def test_a_user_over_the_limit_across_tokens_and_session_is_refused(limits, api, client, people, token_for):
    limits("select", token="10/60", user="3/60")
    first, second = (api(token_for(people["reviewer"], "sift", "reviewer")) for _ in range(2))
    assert first.post("/select", SELECT).status_code == 200
    assert second.post("/select", SELECT).status_code == 200
    client.force_login(people["reviewer"])  # the session counts as the same user
    assert client.post(f"{API}/select", SELECT, content_type="application/json").status_code == 200
    _refused(first.post("/select", SELECT), "select", "user")
    # another user is untouched
    assert api(token_for(people["lead"], "sift", "lead")).post("/select", SELECT).status_code == 200


def test_outcomes_count_as_writes_and_a_refused_one_is_not_stored(limits, api, people, token_for):
    limits("write", token="1/60")
    agent = api(token_for(people["lead"], "sift", "lead"))
    trace_id = agent.post("/select", SELECT).json()["trace_id"]
    assert agent.post(f"/traces/{trace_id}/outcomes", {"verdict": "helped"}).status_code == 201
    _refused(agent.post(f"/traces/{trace_id}/outcomes", {"verdict": "missed"}), "write", "token")
    assert list(TraceOutcome.objects.values_list("verdict", flat=True)) == ["helped"]


def test_evaluations_and_corpus_uploads_are_limited_before_anything_is_queued(
    limits, api, client, people, token_for, tmp_path, settings
):
    settings.FG_UPLOAD_DIR = str(tmp_path)
    limits("evaluation", token="1/600")
    limits("upload", user="1/600")
    lead = api(token_for(people["lead"], "sift", "lead"))
    assert_problem(lead.post("/corpora/context-lab/evaluations", {"conditions": ["C9"]}), 422)  # counted
    jobs = Job.objects.count()
    doc = _refused(lead.post("/corpora/context-lab/evaluations", {"conditions": ["C0"]}), "evaluation", "token", 600)
    assert "per 600 s" in doc["detail"] and Job.objects.count() == jobs

    client.force_login(people["root"])
    upload = {"archive": SimpleUploadedFile("c.tar.gz", b"not an archive")}
    assert client.post(f"{API}/corpora", upload).status_code == 422
    again = client.post(f"{API}/corpora", {"archive": SimpleUploadedFile("c.tar.gz", b"not an archive")})
    _refused_upload = assert_problem(again, 429)
    assert "upload limit" in _refused_upload["detail"] and Job.objects.count() == jobs


def test_under_the_limits_everything_is_served(limits, api, people, token_for):
    limits("select", token="5/60", user="5/60")
    agent = api(token_for(people["auditor"], "sift", "auditor"))
    assert [agent.post("/select", SELECT).status_code for _ in range(5)] == [200] * 5


@pytest.mark.django_db(transaction=True)
def test_the_mcp_server_counts_the_same_limits(limits, people, token_for, monkeypatch):
    from governance.mcp_server import TOKEN_ENV, build_server

    limits("select", token="1/60")
    monkeypatch.setenv(TOKEN_ENV, token_for(people["lead"], "sift", "lead"))

    async def session():
        async with Client(build_server()) as client:
            first = await client.call_tool("select", SELECT)
            second = await client.call_tool("select", SELECT)
            return first, second

    first, second = anyio.run(session)
    assert not first.is_error and second.is_error
    assert "rate limited: over the select limit of 1 requests per 60 s for this token" in str(second.content)
    assert Trace.objects.filter(source="mcp").count() == 1


def test_without_redis_requests_are_let_through(limits, api, people, token_for, settings, caplog):
    limits("select", token="1/60")
    settings.CACHES = {
        **settings.CACHES,
        "ratelimits": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "unix:///nonexistent/redis.sock",
            "OPTIONS": {"socket_timeout": 0.5, "socket_connect_timeout": 0.5},
        },
    }
    agent = api(token_for(people["lead"], "sift", "lead"))
    assert [agent.post("/select", SELECT).status_code for _ in range(3)] == [200, 200, 200]
    assert "cache unavailable" in caplog.text
