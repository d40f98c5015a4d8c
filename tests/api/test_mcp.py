"""The MCP server driven by the SDK's own client: in process, and over stdio via `manage.py mcp`.

Tools run in worker threads with their own database connections, so these tests commit their rows.
"""

from __future__ import annotations

import os
import sys

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {
    "select", "get_trace", "explain_unit", "report_outcome",
    "remember", "supersede", "refute", "close_loop", "recall_unit",
}  # fmt: skip
FAILING = [{"id": "t1", "kind": "failing_test", "content": "test_smoke_retrieval fails after the config change"}]


def _run(coroutine_fn):
    return anyio.run(coroutine_fn)


def test_the_tools_select_explain_and_report_through_the_services(people, token_for, monkeypatch):
    from governance.mcp_server import TOKEN_ENV, build_server
    from selection.models import Trace, TraceOutcome

    monkeypatch.setenv(TOKEN_ENV, token_for(people["lead"], "sift", "lead"))
    server = build_server()

    async def session():
        async with Client(server) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == TOOLS
            selected = await client.call_tool("select", {"project": "sift", "signals": FAILING, "budget_tokens": 400})
            assert not selected.is_error, selected.content
            trace_id = selected.structured_content["trace_id"]
            trace = (await client.call_tool("get_trace", {"trace_id": trace_id})).structured_content
            rejected = next(c["unit_id"] for c in trace["trace"]["candidates"] if c["disposition"] != "admitted")
            why = (
                await client.call_tool("explain_unit", {"trace_id": trace_id, "unit_id": rejected})
            ).structured_content
            reported = await client.call_tool(
                "report_outcome", {"trace_id": trace_id, "verdict": "missed", "missing_units": [rejected]}
            )
            assert not reported.is_error, reported.content
            refused = await client.call_tool("select", {"project": "quill", "query": "anything"})
            return trace_id, rejected, why, refused

    trace_id, rejected, why, refused = _run(session)
    assert Trace.objects.get(pk=trace_id).source == "mcp"
    assert why["unit_id"] == rejected and why["reason_code"]
    assert TraceOutcome.objects.get().missing_units == [rejected]
    assert refused.is_error and "forbidden" in str(refused.content)


def test_without_a_token_every_tool_refuses(context_lab, monkeypatch):
    from governance.mcp_server import TOKEN_ENV, build_server

    monkeypatch.delenv(TOKEN_ENV, raising=False)

    async def session():
        async with Client(build_server()) as client:
            return await client.call_tool("get_trace", {"trace_id": 1})

    result = _run(session)
    assert result.is_error and "no live API token" in str(result.content)


def test_manage_py_mcp_speaks_stdio(people, token_for):
    from django.db import connection

    from selection.serving.serve import select_for_user

    trace_id = select_for_user(
        user=people["auditor"], project_slug="sift", query="smoke test", budget_tokens=300
    ).trace.pk
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp"],
        cwd=root,
        env={
            **os.environ,
            "FG_API_TOKEN": token_for(people["auditor"], "sift", "auditor"),
            "FG_DATABASE_NAME": connection.settings_dict["NAME"],
            "FG_QUIET_EMBEDDED": "1",
        },
    )

    async def session():
        async with Client(params) as client:
            return await client.call_tool("get_trace", {"trace_id": trace_id})

    result = _run(session)
    assert not result.is_error, result.content
    assert result.structured_content["id"] == trace_id


def test_streamable_http_under_the_same_site(live_server, people, token_for):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    token = token_for(people["auditor"], "sift", "auditor")
    url = f"{live_server.url}/mcp"
    trace_id = None

    async def session():
        nonlocal trace_id
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                selected = await client.call_tool(
                    "select", {"project": "sift", "query": "smoke test", "budget_tokens": 300}
                )
                assert not selected.is_error, selected.content
                trace_id = selected.structured_content["trace_id"]
                report = await client.call_tool("report_outcome", {"trace_id": trace_id, "verdict": "helped"})
                return names, report

    from selection.models import Trace, TraceOutcome

    names, report = _run(session)
    assert names == TOOLS
    assert not report.is_error, report.content
    assert Trace.objects.get(pk=trace_id).source == "mcp"
    assert TraceOutcome.objects.get().reporter == people["auditor"]

    anonymous = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
    assert anonymous.status_code == 401
