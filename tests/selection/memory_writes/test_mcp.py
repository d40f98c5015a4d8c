"""Done when: an agent with an agent token remembers a unit over MCP (the SDK's client), selects,
and its unit is in the next bundle, cited by the trace; under candidate admission it is not until
a reviewer admits it. Tools run in worker threads with their own connections: rows are committed."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

pytestmark = pytest.mark.django_db(transaction=True)

QUERY = "quokka reranker for tail queries"
QUOKKA = {
    "text": "The quokka reranker reorders tail queries by click-free relevance; use it for every tail query.",
    "evidence_class": "design_note",
    "title": "Quokka reranker for tail queries",
}


def _session(server, calls):
    async def run():
        async with Client(server) as client:
            answers = []
            for name, arguments in calls:
                answers.append(await client.call_tool(name, arguments))
            return answers

    return anyio.run(run)


def _cited(trace_id: int, uid: str) -> bool:
    from selection.models import TraceCandidate

    return TraceCandidate.objects.filter(trace_id=trace_id, unit_uid=uid, disposition="admitted").exists()


def test_an_agent_remembers_and_its_unit_is_in_the_next_bundle(people, agent_token, monkeypatch):
    from governance.mcp_server import TOKEN_ENV, build_server
    from selection.models import MemoryChange

    monkeypatch.setenv(TOKEN_ENV, agent_token)
    remembered, selected, recalled, refused = _session(build_server(), [
        ("remember", {"project": "sift", **QUOKKA, "idempotency_key": "turn-7"}),
        ("select", {"project": "sift", "query": QUERY, "budget_tokens": 4000}),
        ("recall_unit", {"project": "sift", "unit_id": "sf-rule-segments"}),
        ("remember", {"project": "quill", **QUOKKA}),
    ])  # fmt: skip
    assert not remembered.is_error, remembered.content
    uid = remembered.structured_content["unit"]
    assert remembered.structured_content["status"] == "active"
    assert MemoryChange.objects.get(unit__uid=uid).via == "mcp"
    assert uid in selected.structured_content["bundle"]["sources"]
    assert _cited(selected.structured_content["trace_id"], uid)
    assert recalled.structured_content["record"]["id"] == "sf-rule-segments"
    assert refused.is_error and "forbidden" in str(refused.content)


def test_under_candidate_admission_the_unit_waits_for_a_reviewer(people, agent_token, candidate_admission,
                                                                   monkeypatch):  # fmt: skip
    from governance.mcp_server import TOKEN_ENV, build_server
    from selection.memory.writes.admission import unit_admit
    from selection.models import Project

    monkeypatch.setenv(TOKEN_ENV, agent_token)
    remembered, before = _session(build_server(), [
        ("remember", {"project": "sift", **QUOKKA}),
        ("select", {"project": "sift", "query": QUERY, "budget_tokens": 4000}),
    ])  # fmt: skip
    uid = remembered.structured_content["unit"]
    assert remembered.structured_content["status"] == "candidate"
    assert uid not in before.structured_content["bundle"]["sources"]
    unit_admit(actor=people["lead"], project=Project.objects.get(slug="sift"), uid=uid, reason="checked", via="page")
    (after,) = _session(build_server(), [("select", {"project": "sift", "query": QUERY, "budget_tokens": 4000})])
    assert uid in after.structured_content["bundle"]["sources"]
    assert _cited(after.structured_content["trace_id"], uid)


def test_supersede_refute_and_close_loop_over_mcp(people, agent_token, monkeypatch):
    from governance.mcp_server import TOKEN_ENV, build_server
    from selection.models import MemoryUnit

    loop = MemoryUnit.objects.filter(project__slug="sift", open_loop_status="open").order_by("uid").first()
    monkeypatch.setenv(TOKEN_ENV, agent_token)
    superseded, refuted, closed, again = _session(build_server(), [
        ("supersede", {"project": "sift", "unit_ids": ["sf-rule-segments"], **QUOKKA}),
        ("refute", {"project": "sift", "unit_id": "sf-rule-beat-baseline", **QUOKKA}),
        ("close_loop", {"project": "sift", "unit_id": loop.uid}),
        ("close_loop", {"project": "sift", "unit_id": loop.uid}),
    ])  # fmt: skip
    assert superseded.structured_content["closed"] == ["sf-rule-segments"]
    assert refuted.structured_content["links"] == {"refutes": ["sf-rule-beat-baseline"]}
    assert closed.structured_content["open_loop"]["status"] == "closed"
    assert again.is_error and "closed already" in str(again.content)


def test_remember_over_streamable_http(live_server, people, agent_token):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def session():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {agent_token}"}, timeout=120) as http:
            async with Client(streamable_http_client(f"{live_server.url}/mcp", http_client=http)) as client:
                remembered = await client.call_tool("remember", {"project": "sift", **QUOKKA})
                selected = await client.call_tool("select", {"project": "sift", "query": QUERY, "budget_tokens": 4000})
                return remembered, selected

    remembered, selected = anyio.run(session)
    assert not remembered.is_error, remembered.content
    assert remembered.structured_content["unit"] in selected.structured_content["bundle"]["sources"]


def test_remember_over_stdio(people, agent_token):
    import os
    import sys

    from django.db import connection
    from mcp import StdioServerParameters

    from selection.models import MemoryUnit

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp"],
        cwd=root,
        env={**os.environ, "FG_API_TOKEN": agent_token, "FG_DATABASE_NAME": connection.settings_dict["NAME"],
             "FG_QUIET_EMBEDDED": "1"},
    )  # fmt: skip
    remembered, selected = _session(params, [
        ("remember", {"project": "sift", **QUOKKA}),
        ("select", {"project": "sift", "query": QUERY, "budget_tokens": 4000}),
    ])  # fmt: skip
    assert not remembered.is_error, remembered.content
    uid = remembered.structured_content["unit"]
    assert MemoryUnit.objects.get(uid=uid).changes.get().via == "mcp"
    assert uid in selected.structured_content["bundle"]["sources"]
    assert _cited(selected.structured_content["trace_id"], uid)
