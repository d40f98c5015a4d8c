"""The Model Context Protocol server: select, get_trace, explain_unit and report_outcome as tools,
and memory's: remember, supersede, refute, close_loop and recall_unit.

Each tool authenticates with a personal API token, the same tokens and scopes as the HTTP API:
over streamable HTTP from the `Authorization: Bearer` header, over stdio (`manage.py mcp`) from
FG_API_TOKEN. It then calls the same services and selectors as the API routes, so an agent can do
exactly what its token's owner could through the pages, and no more, within the same rate limits
(authority.ratelimits: `select` counts as a selection, `report_outcome` as a write).
"""

from __future__ import annotations

import os
from typing import Any, Literal

import anyio
from asgiref.sync import async_to_sync
from django.core.exceptions import PermissionDenied
from django.db import close_old_connections
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from authority import access
from authority.errors import GovernanceError
from authority.ratelimits import RateLimited, rate_check
from selection import serving
from selection.engine.types import WorkSignal
from selection.evaluation.ladder import EvaluationError
from selection.memory.writes import services as memory_writes
from selection.memory.writes.records import unit_document
from selection.models import MemoryUnit, Project
from selection.serving.api import select_document
from selection.serving.selections import SelectionError
from selection.serving.warm_up import warm_up_start
from selection.traces import selectors
from selection.traces.api import counterfactual_document, outcome_document, trace_document

from .tokens import services as tokens

TOKEN_ENV = "FG_API_TOKEN"
INSTRUCTIONS = (
    "Frame Governance selects the context an agent may see under a project's governed frame. "
    "Call `select` with the project and what you are doing (a query and/or work signals such as a "
    "failing test); it returns the bundle and a trace id. `get_trace` shows every candidate with its "
    "reason code, `explain_unit` says why one unit was or was not admitted, and `report_outcome` "
    "tells the maintainers whether the bundle served the work. `remember` writes what you learned as a "
    "memory unit, `supersede` replaces units that changed, `refute` marks a claim disproved, `close_loop` "
    "closes (or reopens) an open loop, and `recall_unit` reads one unit with its history."
)


def _user(ctx: Context | None):
    """The token's owner, with the token's scope; ToolError when no live token came with the call."""
    headers = None
    if ctx is not None:
        try:
            headers = ctx.headers
        except ValueError:
            headers = None
    if headers:
        user = tokens.token_user_from_header(headers.get("authorization") or headers.get("Authorization") or "")
    else:
        secret = os.environ.get(TOKEN_ENV, "").strip()
        user = tokens.token_user(secret) if secret else None
    if user is None:
        raise ToolError(f"no live API token: send `Authorization: Bearer <token>` or set {TOKEN_ENV}")
    return user


def _call(ctx: Context | None, action):
    """Run one tool's action as the token's user; domain refusals become tool errors in words."""
    close_old_connections()
    try:
        return action(_user(ctx))
    except PermissionDenied as error:
        raise ToolError(f"forbidden: {error}") from error
    except Http404 as error:
        raise ToolError(f"not found: {error}") from error
    except (SelectionError, EvaluationError, GovernanceError) as error:
        raise ToolError(str(error)) from error
    except RateLimited as error:
        raise ToolError(f"rate limited: {error}") from error
    finally:
        close_old_connections()


def build_server() -> MCPServer:
    warm_up_start()  # the model and the corpus indexes load while the client connects
    server = MCPServer("frame-governance", instructions=INSTRUCTIONS)

    @server.tool()
    def select(
        project: str,
        query: str = "",
        signals: list[dict[str, str]] | None = None,
        objective: str = "",
        work_type: str | None = None,
        budget_tokens: int | None = None,
        condition: str = "C6",
        builder: str = "default",
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Select a context bundle. `signals`: [{"id", "kind", "content"}], kind one of user_message,
        project_state, tool_result, failing_test, scheduled_job, event, agent_task."""

        def run(user):
            rate_check(user, "select")
            work_signals = tuple(
                WorkSignal(id=str(s.get("id", f"s{i}")), kind=str(s.get("kind", "")), content=str(s.get("content", "")))
                for i, s in enumerate(signals or [])
            )
            selection = serving.select_for_user(
                user=user,
                project_slug=project,
                query=query,
                signals=work_signals,
                objective=objective,
                work_type=work_type,
                budget_tokens=budget_tokens,
                condition=condition,
                source="mcp",
                builder=builder,
            )
            return select_document(selection, user=user)

        return _call(ctx, run)

    @server.tool()
    def get_trace(trace_id: int, ctx: Context | None = None) -> dict[str, Any]:
        """One stored trace in full: frames, configuration, every candidate with its reason code."""

        def run(user):
            trace, _ = selectors.readable_trace(user=user, pk=trace_id)
            return _jsonable(trace_document(trace, user=user))

        return _call(ctx, run)

    @server.tool()
    def explain_unit(trace_id: int, unit_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Why a unit was or was not admitted to a trace's bundle, and the smallest changes (budget,
        class rank, class pull) that would have admitted it."""

        def run(user):
            trace, _ = selectors.readable_trace(user=user, pk=trace_id)
            return _jsonable(counterfactual_document(trace, unit_id, user=user))

        return _call(ctx, run)

    @server.tool()
    def report_outcome(
        trace_id: int,
        verdict: Literal["helped", "partial", "missed", "harmful", "failed"],
        note: str = "",
        missing_units: list[str] | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Report how the bundle of a trace served the work: helped, partial, missed, harmful, or
        failed (the answer failed although the evidence was present)."""

        def run(user):
            rate_check(user, "write")
            outcome = serving.outcome_report(
                user=user, trace_id=trace_id, verdict=verdict, note=note, missing_units=missing_units or ()
            )
            return _jsonable(outcome_document(outcome))

        return _call(ctx, run)

    _memory_tools(server)
    return server


def _unit_fields(text, evidence_class, title, subject, facet, valid_from, open_loop, fields) -> dict[str, Any]:
    """A unit's units.jsonl object from a tool's arguments (`fields`: any other keys of the format)."""
    unit: dict[str, Any] = dict(fields or {})
    for key, value in (("text", text), ("class", evidence_class), ("title", title), ("subject", subject),
                       ("facet", facet), ("valid_from", valid_from)):  # fmt: skip
        if value not in (None, ""):
            unit[key] = value
    if open_loop:
        unit["open_loop"] = {"status": "open", "kind": open_loop}
    return unit


def _project(slug: str) -> Project:
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        raise Http404(f'no project "{slug}"')
    return project


def _memory_tools(server: MCPServer) -> None:
    """Memory's tools: each calls the write service the API, the pages and the command call."""

    @server.tool()
    def remember(
        project: str,
        text: str,
        evidence_class: str,
        title: str = "",
        subject: str | None = None,
        facet: str | None = None,
        valid_from: str | None = None,
        open_loop: Literal["todo", "question", "expectation"] | None = None,
        fields: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Write one memory unit in the project: what you learned, as a class the project knows.
        `open_loop` makes it an open loop of that kind; `fields`: other units.jsonl keys (supports,
        refutes, paths, ...). With `idempotency_key`, a retry is applied once. Under the frame's
        candidate admission the unit waits for a reviewer before it is selected."""
        unit = _unit_fields(text, evidence_class, title, subject, facet, valid_from, open_loop, fields)
        return _write(ctx, lambda user: memory_writes.unit_create(
            actor=user, project=_project(project), fields=unit, via="mcp", idempotency_key=idempotency_key
        ).document)  # fmt: skip

    @server.tool()
    def supersede(
        project: str,
        unit_ids: list[str],
        text: str,
        evidence_class: str,
        title: str = "",
        subject: str | None = None,
        facet: str | None = None,
        valid_from: str | None = None,
        fields: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Write a unit that supersedes `unit_ids` (a decision changed): their validity closes at its
        `valid_from` (now when not given)."""
        unit = _unit_fields(text, evidence_class, title, subject, facet, valid_from, None, fields)
        return _write(ctx, lambda user: memory_writes.unit_supersede(
            actor=user, project=_project(project), targets=unit_ids, fields=unit, via="mcp",
            idempotency_key=idempotency_key,
        ).document)  # fmt: skip

    @server.tool()
    def refute(
        project: str,
        unit_id: str,
        text: str | None = None,
        evidence_class: str | None = None,
        title: str = "",
        source: str | None = None,
        idempotency_key: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Refute `unit_id` (a claim disproved): with `text` and `evidence_class`, a new unit saying
        why; or `source`, an existing unit of the project marked as refuting it."""
        unit = None if source else _unit_fields(text, evidence_class, title, None, None, None, None, None)
        return _write(ctx, lambda user: memory_writes.unit_refute(
            actor=user, project=_project(project), target=unit_id, fields=unit, source=source, via="mcp",
            idempotency_key=idempotency_key,
        ).document)  # fmt: skip

    @server.tool()
    def close_loop(
        project: str, unit_id: str, reopen: bool = False, idempotency_key: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Close the open loop `unit_id` (a todo done, a question answered); `reopen`: open it again."""
        write = memory_writes.loop_reopen if reopen else memory_writes.loop_close
        return _write(ctx, lambda user: write(
            actor=user, project=_project(project), uid=unit_id, via="mcp", idempotency_key=idempotency_key
        ).document)  # fmt: skip

    @server.tool()
    def recall_unit(project: str, unit_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """One unit of the project: its record, status (active, candidate, declined), what supersedes
        it, and every change that made it (sequence, kind, who, through what)."""

        def run(user):
            scoped = _project(project)
            access.access_read(user, scoped)
            unit = MemoryUnit.objects.select_related("project").filter(project=scoped, uid=unit_id).first()
            if unit is None:
                raise Http404(f'{project} holds no unit "{unit_id}"')
            return unit_document(unit)

        return _call(ctx, run)


def _write(ctx: Context | None, action) -> Any:
    """A memory write: the token's or user's write rate limit first, then the write service."""

    def run(user):
        rate_check(user, "write")
        return action(user)

    return _call(ctx, run)


def _jsonable(doc):
    """Datetimes as ISO strings: a tool's structured result is plain JSON."""
    if isinstance(doc, dict):
        return {k: _jsonable(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_jsonable(v) for v in doc]
    if hasattr(doc, "isoformat"):
        return doc.isoformat()
    return doc


# --- streamable HTTP under the same site -------------------------------------------------------

MCP_PATH = "/mcp"


def _asgi_scope(request) -> dict:
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": MCP_PATH,
        "raw_path": MCP_PATH.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "client": (request.META.get("REMOTE_ADDR") or "127.0.0.1", 0),
        "server": (request.get_host().split(":")[0], int(request.get_port() or 80)),
    }


async def _serve_once(scope: dict, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One stateless MCP exchange (JSON responses, no session) through the SDK's own transport."""
    server = build_server()
    # Django's ALLOWED_HOSTS and the bearer token guard this endpoint; the SDK's DNS-rebinding
    # check would refuse any host but localhost
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    sent = False
    status, headers, chunks = 500, [], []

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()

    async def send(message):
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status, headers = message["status"], list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async with server.session_manager.run():
        await app(scope, receive, send)
    return status, headers, b"".join(chunks)


@csrf_exempt  # a bearer token authenticates it, never a cookie
def mcp_http(request):
    """The MCP streamable HTTP endpoint at /mcp, served by Django: stateless, JSON responses."""
    if tokens.token_user_from_header(request.headers.get("Authorization", "")) is None:
        response = JsonResponse({"error": "send a live API token as `Authorization: Bearer <token>`"}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="frame-governance"'
        return response
    status, headers, body = async_to_sync(_serve_once)(_asgi_scope(request), request.body)
    response = HttpResponse(body, status=status)
    for name, value in headers:
        if name.lower() not in (b"content-length", b"transfer-encoding", b"connection"):
            response[name.decode("latin-1")] = value.decode("latin-1")
    return response
