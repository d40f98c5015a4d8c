"""The Model Context Protocol server: select, get_trace, explain_unit and report_outcome as tools.

Each tool authenticates with a personal API token, the same tokens and scopes as the HTTP API:
over streamable HTTP from the `Authorization: Bearer` header, over stdio (`manage.py mcp`) from
FG_API_TOKEN. It then calls the same services and selectors as the API routes, so an agent can do
exactly what its token's owner could through the pages, and no more.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from django.core.exceptions import PermissionDenied
from django.db import close_old_connections
from django.http import Http404
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from selection import selectors, serving
from selection.api import counterfactual_document, outcome_document, select_document, trace_document
from selection.engine.types import WorkSignal
from selection.evaluation import EvaluationError
from selection.services import SelectionError

from . import tokens

TOKEN_ENV = "FG_API_TOKEN"
INSTRUCTIONS = (
    "Frame Governance selects the context an agent may see under a project's governed frame. "
    "Call `select` with the project and what you are doing (a query and/or work signals such as a "
    "failing test); it returns the bundle and a trace id. `get_trace` shows every candidate with its "
    "reason code, `explain_unit` says why one unit was or was not admitted, and `report_outcome` "
    "tells the maintainers whether the bundle served the work."
)


def _user(ctx: Context | None):
    """The token's owner, with the token's scope; ToolError when no live token came with the call."""
    secret = ""
    headers = None
    if ctx is not None:
        try:
            headers = ctx.headers
        except ValueError:
            headers = None
    if headers:
        value = headers.get("authorization") or headers.get("Authorization") or ""
        if value.lower().startswith("bearer "):
            secret = value[7:].strip()
    if not secret:
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
    except (SelectionError, EvaluationError) as error:
        raise ToolError(str(error)) from error
    finally:
        close_old_connections()


def build_server() -> MCPServer:
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
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Select a context bundle. `signals`: [{"id", "kind", "content"}], kind one of user_message,
        project_state, tool_result, failing_test, scheduled_job, event, agent_task."""

        def run(user):
            work_signals = tuple(
                WorkSignal(id=str(s.get("id", f"s{i}")), kind=str(s.get("kind", "")), content=str(s.get("content", "")))
                for i, s in enumerate(signals or [])
            )
            selection = serving.selection_request(
                user=user,
                project_slug=project,
                query=query,
                signals=work_signals,
                objective=objective,
                work_type=work_type,
                budget_tokens=budget_tokens,
                condition=condition,
                source="mcp",
            )
            return select_document(selection)

        return _call(ctx, run)

    @server.tool()
    def get_trace(trace_id: int, ctx: Context | None = None) -> dict[str, Any]:
        """One stored trace in full: frames, configuration, every candidate with its reason code."""

        def run(user):
            trace, _ = selectors.readable_trace(user=user, pk=trace_id)
            return _jsonable(trace_document(trace))

        return _call(ctx, run)

    @server.tool()
    def explain_unit(trace_id: int, unit_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Why a unit was or was not admitted to a trace's bundle, and the smallest changes (budget,
        class rank, class pull) that would have admitted it."""

        def run(user):
            trace, _ = selectors.readable_trace(user=user, pk=trace_id)
            return _jsonable(counterfactual_document(trace, unit_id))

        return _call(ctx, run)

    @server.tool()
    def report_outcome(
        trace_id: int,
        verdict: Literal["helped", "partial", "missed", "harmful"],
        note: str = "",
        missing_units: list[str] | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Report how the bundle of a trace served the work: helped, partial, missed or harmful."""

        def run(user):
            outcome = serving.outcome_report(
                user=user, trace_id=trace_id, verdict=verdict, note=note, missing_units=missing_units or ()
            )
            return _jsonable(outcome_document(outcome))

        return _call(ctx, run)

    return server


def _jsonable(doc):
    """Datetimes as ISO strings: a tool's structured result is plain JSON."""
    if isinstance(doc, dict):
        return {k: _jsonable(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_jsonable(v) for v in doc]
    if hasattr(doc, "isoformat"):
        return doc.isoformat()
    return doc
