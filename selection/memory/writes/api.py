"""The API's memory write routes: each parses, calls the one write service, and shapes its answer.

A unit is sent as its units.jsonl object; the corpus reader's own checks judge it in the service
(a refusal is 422 naming the field, a conflict 409). A write carrying an `Idempotency-Key` header
is applied at most once: the same key and body again answer as the first time did (with
`Idempotent-Replayed: true`), the same key with another body is 409.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from ninja import Field, Router, Schema, Status
from pydantic import ConfigDict

from authority import access
from authority.ratelimits import rate_limit
from selection.memory.writes import admission, services
from selection.memory.writes.records import MemoryWrite, unit_document
from selection.models import MemoryUnit, Project

router = Router(tags=["memory"])

KEY_HEADER = "Idempotency-Key"


class UnitIn(Schema):
    """A unit as a units.jsonl object (docs/corpus-format.md); `project` is the path's. Left out:
    `id` (one is made), `created_at` (the time of the write). "x-" keys are kept."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: Any = Field(None, description="[a-z0-9][a-z0-9_.-]*, free in the corpus")
    evidence_class: Any = Field(None, alias="class", description="a class the project's frame or units know")
    title: Any = None
    text: Any = Field(None, description="required, not blank")
    created_at: Any = None
    valid_from: Any = None
    valid_to: Any = None
    supersedes: Any = None
    echo_of: Any = None
    supports: Any = None
    refutes: Any = None
    open_loop: Any = Field(None, description='{"status": "open"|"closed", "kind": "todo"|"question"|"expectation"}')
    paths: Any = None
    subject: Any = None
    facet: Any = None
    root: Any = None


class LinkIn(Schema):
    """Either a new unit that makes the link, or `source`: an existing unit of the project given it."""

    unit: UnitIn | None = None
    source: str | None = Field(None, max_length=200)


class DecisionIn(Schema):
    reason: str = Field(max_length=2000)


class WriteOut(Schema):
    action: str
    unit: str
    project: str
    status: str
    sequence: int = Field(description="the memory sequence of the write's first change")
    sequences: list[int]
    links: dict[str, list[str]] = {}
    closed: list[str] = Field([], description="units whose validity the write closed (supersession)")
    conflicts: list[str] = Field([], description="units a candidate collides with (same subject and facet)")
    open_loop: dict[str, str] | None = None
    reason: str | None = None


class ChangeOut(Schema):
    sequence: int
    kind: str
    recorded_at: str | None
    actor: str | None
    via: str


class UnitOut(Schema):
    unit: str
    project: str
    status: str
    record: dict[str, Any]
    superseded_by: list[str]
    created_sequence: int
    sequence: int
    recorded_at: str | None
    changes: list[ChangeOut]


def _fields(unit: UnitIn | None) -> dict[str, Any] | None:
    return None if unit is None else unit.model_dump(by_alias=True, exclude_unset=True)


def _project(slug: str) -> Project:
    return get_object_or_404(Project, slug=slug)


def _answer(response: HttpResponse, write: MemoryWrite) -> dict[str, Any]:
    if write.replayed:
        response["Idempotent-Replayed"] = "true"
    return write.document


def _key(request) -> str | None:
    return request.headers.get(KEY_HEADER)


WRITES = {"response": {201: WriteOut}, "throttle": rate_limit("write")}


@router.post("/projects/{slug}/units", url_name="memory-unit-create", summary="Write a unit", **WRITES)
def memory_unit_create(request, response: HttpResponse, slug: str, body: UnitIn):
    """A lead, or an agent token of the project. Under the frame's `memory.admission: candidate`, an
    agent's unit lands as a candidate (never selected until a lead or reviewer admits it)."""
    write = services.unit_create(
        actor=request.auth, project=_project(slug), fields=_fields(body), via="api", idempotency_key=_key(request)
    )
    return Status(201, _answer(response, write))


@router.post("/projects/{slug}/units/{uid}/supersede", url_name="memory-unit-supersede", summary="Supersede a unit",
             **WRITES)  # fmt: skip
def memory_unit_supersede(request, response: HttpResponse, slug: str, uid: str, body: UnitIn):
    """A new unit superseding `uid` (and any its own `supersedes` lists): their validity closes at
    its `valid_from` (the time of the write when it gives none)."""
    write = services.unit_supersede(
        actor=request.auth, project=_project(slug), targets=[uid], fields=_fields(body), via="api",
        idempotency_key=_key(request),
    )  # fmt: skip
    return Status(201, _answer(response, write))


def _linked(service, request, response, slug: str, uid: str, body: LinkIn):
    write = service(
        actor=request.auth, project=_project(slug), target=uid, fields=_fields(body.unit), source=body.source,
        via="api", idempotency_key=_key(request),
    )  # fmt: skip
    return Status(201, _answer(response, write))


@router.post("/projects/{slug}/units/{uid}/refute", url_name="memory-unit-refute", summary="Refute a unit", **WRITES)
def memory_unit_refute(request, response: HttpResponse, slug: str, uid: str, body: LinkIn):
    """A new unit refuting `uid`, or `source` (an existing unit) marked as refuting it."""
    return _linked(services.unit_refute, request, response, slug, uid, body)


@router.post("/projects/{slug}/units/{uid}/echo", url_name="memory-unit-echo", summary="Mark an echo", **WRITES)
def memory_unit_echo(request, response: HttpResponse, slug: str, uid: str, body: LinkIn):
    """A new unit restating `uid`, or `source` marked as an echo of it (restatement is not
    corroboration)."""
    return _linked(services.unit_echo, request, response, slug, uid, body)


@router.post("/projects/{slug}/units/{uid}/support", url_name="memory-unit-support", summary="Support a unit",
             **WRITES)  # fmt: skip
def memory_unit_support(request, response: HttpResponse, slug: str, uid: str, body: LinkIn):
    """A new unit supporting `uid`, or `source` marked as supporting it."""
    return _linked(services.unit_support, request, response, slug, uid, body)


@router.post("/projects/{slug}/units/{uid}/close-loop", url_name="memory-loop-close", summary="Close an open loop",
             response=WriteOut)  # fmt: skip
def memory_loop_close(request, response: HttpResponse, slug: str, uid: str):
    write = services.loop_close(
        actor=request.auth, project=_project(slug), uid=uid, via="api", idempotency_key=_key(request)
    )
    return _answer(response, write)


@router.post("/projects/{slug}/units/{uid}/reopen-loop", url_name="memory-loop-reopen", summary="Reopen a loop",
             response=WriteOut)  # fmt: skip
def memory_loop_reopen(request, response: HttpResponse, slug: str, uid: str):
    write = services.loop_reopen(
        actor=request.auth, project=_project(slug), uid=uid, via="api", idempotency_key=_key(request)
    )
    return _answer(response, write)


@router.post("/projects/{slug}/units/{uid}/admit", url_name="memory-unit-admit", summary="Admit a candidate",
             response=WriteOut, throttle=rate_limit("write"))  # fmt: skip
def memory_unit_admit(request, slug: str, uid: str, body: DecisionIn):
    """A lead or a reviewer (not the candidate's writer), with a reason kept in the audit log."""
    return admission.unit_admit(actor=request.auth, project=_project(slug), uid=uid, reason=body.reason,
                                via="api").document  # fmt: skip


@router.post("/projects/{slug}/units/{uid}/decline", url_name="memory-unit-decline", summary="Decline a candidate",
             response=WriteOut, throttle=rate_limit("write"))  # fmt: skip
def memory_unit_decline(request, slug: str, uid: str, body: DecisionIn):
    return admission.unit_decline(actor=request.auth, project=_project(slug), uid=uid, reason=body.reason,
                                  via="api").document  # fmt: skip


@router.get("/projects/{slug}/units/{uid}", url_name="memory-unit", response=UnitOut, summary="One unit")
def memory_unit(request, slug: str, uid: str):
    """The unit's record, status, sequences and every change that made it."""
    project = _project(slug)
    access.access_read(request.auth, project)
    unit = get_object_or_404(MemoryUnit.objects.select_related("project"), project=project, uid=uid)
    return unit_document(unit)
