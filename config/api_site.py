"""The one NinjaAPI at /api/v1/: it mounts each app's router, authenticates, and speaks problem details.

Part of the project package, like urls.py: it mounts each app's router by its dotted path, as
urls.py includes each app's urls. Authentication is a personal API token (`Authorization: Bearer`)
or the browser's session with its CSRF token; the token's scope rides on the user into access.py.
Every 4xx (and the 500 nobody should see) is an RFC 9457 problem details document, with the
offending field's location in `errors`.
"""

from __future__ import annotations

import copy
import json
import logging
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, JsonResponse
from ninja import NinjaAPI, Schema, Status
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError
from ninja.security import HttpBearer, SessionAuth

from authority.errors import GovernanceError, InputRefused
from config.errors import PROBLEM_MEDIA_TYPE, field_error, problem
from governance.proposals.errors import PromotionRefused, ProposalInvalid, RebaseConflict
from governance.tokens import services as tokens
from selection.corpus import CorpusError
from selection.engine.routing.report import routing_summary
from selection.evaluation.ladder import EvaluationError
from selection.memory.uploads import ArchiveRefused
from selection.serving.selections import SelectionError
from selection.serving.serve import StrictRoutingRefused

from .site_health import HealthOut, LiveOut, ReadyOut, site_health, site_ready

logger = logging.getLogger(__name__)

# what every operation may answer besides its success; documented once, for every operation
ERROR_STATUSES = {
    "400": "The request is malformed",
    "401": "No valid API token or session",
    "403": "The token or user lacks the role this needs (or the CSRF check failed)",
    "404": "No such object, or none you may see",
    "409": "The action conflicts with the object's state",
    "413": "The upload is over a limit",
    "422": "A field is invalid; `errors` says which",
    "429": "Over a rate limit of the token or the user; `Retry-After` says when to try again",
    "503": "The database cannot be reached; `Retry-After` says when to try again",
}


class ProblemField(Schema):
    location: list[str | int]
    pointer: str
    detail: str


class Problem(Schema):
    """RFC 9457 problem details; `errors` names each offending field."""

    type: str
    title: str
    status: int
    detail: str
    instance: str
    errors: list[ProblemField] = []


# --- authentication --------------------------------------------------------------------------


class ApiToken(HttpBearer):
    """`Authorization: Bearer fg_…`: a personal token, scoped, expiring, revocable."""

    def authenticate(self, request: HttpRequest, token: str):
        return tokens.token_user(token)


class BrowserSession(SessionAuth):
    """The dashboard's session cookie; unsafe methods need the CSRF token too."""

    def _get_key(self, request: HttpRequest):
        # no signed-in session: the request is anonymous (401), not a failed CSRF check (403)
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        return super()._get_key(request)

    def authenticate(self, request: HttpRequest, key: str | None):
        user = getattr(request, "user", None)
        return user if user is not None and user.is_authenticated and user.is_active else None


class GovernanceAPI(NinjaAPI):
    """A NinjaAPI whose schema documents the problem details of every error status."""

    def get_openapi_operation_id(self, operation) -> str:
        # named by the app that answers it, not by the module inside the app that holds the route
        app = operation.view_func.__module__.split(".")[0]
        return f"{app}_api_{operation.view_func.__name__}"

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components["Problem"] = _problem_schema()
        reference = {"$ref": "#/components/schemas/Problem"}
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                responses = operation.setdefault("responses", {})
                for status, description in ERROR_STATUSES.items():
                    responses[status] = {
                        "description": description,
                        "content": {PROBLEM_MEDIA_TYPE: {"schema": reference}},
                    }
        return schema


def _problem_schema() -> dict[str, Any]:
    """Problem's JSON schema with ProblemField inlined, so one component documents every error."""
    schema = copy.deepcopy(Problem.model_json_schema())
    field = schema.pop("$defs")["ProblemField"]
    schema["properties"]["errors"]["items"] = field
    return schema


def _signed_in(view):
    """The schema and its docs page answer a signed-in user or a live token, like every operation:
    nothing but the login page and /health answers without authentication (docs/trust.md)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        user = getattr(request, "user", None)
        signed_in = user is not None and user.is_authenticated and user.is_active
        if signed_in or tokens.token_user_from_header(request.headers.get("Authorization", "")) is not None:
            return view(request, *args, **kwargs)
        return _unauthenticated(request, None)

    return wrapped


api = GovernanceAPI(
    title="Frame Governance API",
    version="1",
    description=(
        "Select context bundles, read and verify their traces, propose frame changes, review "
        "backtests and promote. Authenticate with a personal API token (`Authorization: Bearer "
        "fg_…`, created on the API tokens page) or, from the browser, with the session and its CSRF token. "
        "Errors are RFC 9457 problem details."
    ),
    urls_namespace="api-1",
    auth=[ApiToken(), BrowserSession(csrf=True)],
    docs_decorator=_signed_in,
)


@api.exception_handler(ValidationError)
def _validation(request, exc: ValidationError):
    errors = [field_error(e.get("loc", ()), str(e.get("msg", "invalid"))) for e in exc.errors]
    first = errors[0] if errors else None
    detail = f"{'.'.join(map(str, first['location']))}: {first['detail']}" if first else "invalid request"
    return problem(request, 422, "Invalid request", detail, slug="validation", errors=errors)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc: AuthenticationError | None):
    return problem(
        request,
        401,
        "Authentication required",
        "send a live API token as `Authorization: Bearer <token>`, or sign in",
        slug="unauthenticated",
    )


@api.exception_handler(Throttled)
def _rate_limited(request, exc: Throttled):
    # authority.ratelimits refused it before the body was read; ninja adds Retry-After
    refused = getattr(request, "rate_limited", None)
    detail = str(refused) if refused is not None else "too many requests"
    return problem(request, 429, "Too many requests", detail, slug="rate-limited")


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    titles = {400: "Bad request", 403: "Forbidden", 404: "Not found", 405: "Method not allowed", 413: "Too large"}
    return problem(
        request,
        exc.status_code,
        titles.get(exc.status_code, "Request refused"),
        str(exc),
        slug=f"http-{exc.status_code}",
    )


@api.exception_handler(PermissionDenied)
def _forbidden(request, exc):
    return problem(request, 403, "Forbidden", str(exc) or "you may not do this", slug="forbidden")


@api.exception_handler(Http404)
def _not_found(request, exc):
    return problem(request, 404, "Not found", str(exc) or "no such object", slug="not-found")


@api.exception_handler(ObjectDoesNotExist)
def _no_object(request, exc):
    return problem(request, 404, "Not found", str(exc) or "no such object", slug="not-found")


@api.exception_handler(ProposalInvalid)
def _proposal_invalid(request, exc: ProposalInvalid):
    errors = [field_error(["body", "patch", *issue.path], issue.message) for issue in exc.issues]
    return problem(request, 422, "Invalid proposal", str(exc), slug="proposal-invalid", errors=errors)


@api.exception_handler(PromotionRefused)
def _promotion_refused(request, exc: PromotionRefused):
    return problem(request, 409, "Promotion refused", str(exc), slug="promotion-refused")


@api.exception_handler(InputRefused)
def _input_refused(request, exc: InputRefused):
    errors = [field_error(["body", *exc.field], str(exc))] if exc.field else []
    return problem(request, 422, "Refused input", str(exc), slug="input-refused", errors=errors)


@api.exception_handler(RebaseConflict)
def _rebase_conflict(request, exc: RebaseConflict):
    # 409 naming each key to resolve, with its three values, so a client can ask its user
    errors = [
        field_error(["body", "resolutions", c.key], f"was {c.base}, now {c.current}, the proposal has {c.proposed}")
        for c in exc.conflicts
    ]
    response = problem(request, 409, "Rebase conflict", str(exc), slug="rebase-conflict", errors=errors)
    doc = json.loads(response.content)
    doc["current_version"] = exc.current.number
    doc["conflicts"] = [
        {"key": c.key, "base": c.base, "current": c.current, "proposed": c.proposed} for c in exc.conflicts
    ]
    return JsonResponse(doc, status=409, content_type=PROBLEM_MEDIA_TYPE)


@api.exception_handler(tokens.TokenRefused)
def _token_refused(request, exc):
    return problem(request, 400, "Token refused", str(exc), slug="token-refused")


@api.exception_handler(GovernanceError)
def _governance_refused(request, exc):
    # a review or backtest refused by the state it finds (backtest.errors derive from it);
    # one refused for a field instead (an approval missing acknowledgements) says so with `status`
    # and `fields`, (location, detail) pairs
    status = getattr(exc, "status", 409)
    errors = [field_error(location, detail) for location, detail in getattr(exc, "fields", ())]
    title = "Refused" if status == 409 else "Invalid request"
    return problem(request, status, title, str(exc), slug="refused", errors=errors)


@api.exception_handler(StrictRoutingRefused)
def _strict_routing_refused(request, exc: StrictRoutingRefused):
    # 409 with the diagnostics: what was routed, what is missing, which units conflict; the
    # refusal is itself traced (trace_id)
    response = problem(request, 409, "Strict routing refused", str(exc), slug="strict-routing-refused")
    doc = json.loads(response.content)
    trace = exc.selection.trace
    doc["trace_id"] = trace.pk
    doc["routing"] = routing_summary(exc.selection.result.trace.routing)
    return JsonResponse(doc, status=409, content_type=PROBLEM_MEDIA_TYPE)


@api.exception_handler(SelectionError)
def _selection_refused(request, exc):
    return problem(request, 422, "Selection refused", str(exc), slug="selection-refused")


@api.exception_handler(EvaluationError)
def _evaluation_refused(request, exc):
    return problem(request, 422, "Evaluation refused", str(exc), slug="evaluation-refused")


@api.exception_handler(ArchiveRefused)
def _archive_refused(request, exc: ArchiveRefused):
    title = "Archive too large" if exc.status == 413 else "Archive refused"
    return problem(request, exc.status, title, str(exc), slug="archive-refused")


@api.exception_handler(CorpusError)
def _corpus_refused(request, exc: CorpusError):
    errors = [
        field_error(["body", "archive", issue.file, *([issue.field] if issue.field else [])], str(issue))
        for issue in exc.issues
    ]
    return problem(request, 422, "Corpus refused", exc.summary, slug="corpus-refused", errors=errors)


# how long a client waits before it asks again while the database cannot be reached
DATABASE_RETRY_AFTER = 5


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def _database_unavailable(request, exc):
    # the database is down or restarting: a clear, quick answer to retry, never a hanging request;
    # the next request opens a fresh connection (CONN_MAX_AGE) and is served once it is back
    logger.warning("API request %s %s: database unavailable: %s", request.method, request.path, exc)
    response = problem(
        request, 503, "Service unavailable", "the database cannot be reached; retry shortly", slug="unavailable"
    )
    response["Retry-After"] = str(DATABASE_RETRY_AFTER)
    return response


@api.exception_handler(Exception)
def _unexpected(request, exc):
    logger.exception("API request %s %s failed", request.method, request.path)
    detail = str(exc) if settings.DEBUG else "the server failed; the error is logged"
    return problem(request, 500, "Internal error", detail, slug="internal")


def unknown_path(request, rest: str = ""):
    """Paths under /api/v1/ that name no operation: a problem document, not the site's 404 page."""
    return problem(request, 404, "Not found", f"no API operation at {request.path}", slug="not-found")


# --- routers and health ----------------------------------------------------------------------

api.add_router("", "selection.api.router")
api.add_router("", "governance.api.router")
api.add_router("", "governance.webhooks.api.router")
api.add_router("", "governance.proposals.api.router")
api.add_router("", "backtest.api.router")


@api.get("/health", response=HealthOut, auth=None, url_name="health", tags=["site"], summary="Is the service up")
def health(request):
    """Database, broker, the Celery workers that answered a ping, and the embedding model."""
    return site_health()


@api.get(
    "/health/live", response=LiveOut, auth=None, url_name="health-live", tags=["site"], summary="Is this process live"
)
def health_live(request):
    """200 while the process answers requests (an orchestrator's liveness probe)."""
    return {"live": True}


@api.get(
    "/health/ready",
    response={200: ReadyOut, 503: ReadyOut},
    auth=None,
    url_name="health-ready",
    tags=["site"],
    summary="Can this process serve a selection at full speed",
)
def health_ready(request):
    """200 once the embedding model and every corpus index are loaded and the database answers;
    503 (with what is loaded so far) before. A readiness probe routes traffic only on 200."""
    state = site_ready()
    return Status(200 if state["ready"] else 503, state)


class ApiProblemMiddleware:
    """Every 4xx under /api/v1/ is problem details, even those answered before a view runs (a
    405 for a method an operation does not take comes straight from ninja as plain text)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            request.path.startswith("/api/v1/")
            and 400 <= response.status_code < 500
            and not response.get("Content-Type", "").startswith(PROBLEM_MEDIA_TYPE)
        ):
            titles = {405: "Method not allowed", 415: "Unsupported media type"}
            title = titles.get(response.status_code, response.reason_phrase or "Request refused")
            detail = f"{request.method} is not allowed here" if response.status_code == 405 else title
            wrapped = problem(request, response.status_code, title, detail, slug=f"http-{response.status_code}")
            if response.has_header("Allow"):
                wrapped["Allow"] = response["Allow"]
            return wrapped
        return response
