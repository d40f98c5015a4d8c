"""A selection asked for by a person, an agent or an operator: the checks, then the one service.

Anyone who may read a project may select from it (the trace records the read); the oracle CO is
refused, since it reads a task's hidden ledger. The API and MCP call select_for_user, the `select`
command calls select_in_project; both end in selections.run_selection, the path every other
interface takes.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.shortcuts import get_object_or_404

from authority import access
from selection.engine.conditions import UnknownCondition, get_condition
from selection.engine.routing.report import strict_refusal
from selection.engine.routing.types import RoutingInputs
from selection.engine.types import SIGNAL_KINDS, WorkFrame, WorkSignal
from selection.models import Project
from selection.serving.selections import Selection, SelectionError, run_selection

ORACLE = "CO"
API_SOURCE = "api"


def select_for_user(*, user, project_slug: str, **request) -> Selection:
    """Select for `user` in one project (its slug), once the user's role lets them read it.

    Raises Http404 (no such project), AccessDenied (no role in it), and whatever
    select_in_project raises; `request` is select_in_project's keywords.
    """
    project = get_object_or_404(Project.objects.select_related("corpus"), slug=project_slug)
    access.access_read(user, project)
    return select_in_project(project=project, user=user, **request)


def select_in_project(
    *,
    project: Project,
    user=None,
    query: str = "",
    signals: tuple[WorkSignal, ...] = (),
    objective: str = "",
    work_type: str | None = None,
    constraints: tuple[str, ...] = (),
    cites: dict[str, list[str]] | None = None,
    budget_tokens: int | None = None,
    condition: str = "C6",
    standpoint: datetime | None = None,
    source: str = API_SOURCE,
    builder: str = "default",
    routing: RoutingInputs | None = None,
) -> Selection:
    """Select in `project`; the query is the signals' contents when none is given.

    Raises SelectionError (a request the engine cannot run: no query nor signal, an unknown
    condition or cited signal, the oracle, an unknown builder or work type), StrictRoutingRefused
    (strict routing found the request incomplete, ambiguous, invalid or conflicted; its trace is
    stored and named).

    `builder` establishes the work frame from the signals ("default": declared when a work type is
    given, else the frame's configured builder); `routing` carries the routing inputs, and the
    user's local overlay units join the request unless `routing.no_local`.
    """
    try:
        get_condition(condition)
    except UnknownCondition as error:
        raise SelectionError(str(error)) from error
    if condition == ORACLE:
        raise SelectionError("the oracle CO reads a task's hidden ledger: evaluations run it, selections do not")
    for signal in signals:
        if signal.kind not in SIGNAL_KINDS:
            raise SelectionError(f"signal {signal.id!r}: kind {signal.kind!r} is not one of {', '.join(SIGNAL_KINDS)}")
    query = (query or "").strip() or "\n".join(s.content for s in signals).strip()
    if not query:
        raise SelectionError("a selection needs a query or at least one work signal")
    known = {s.id for s in signals}
    cites = cites or {}
    for field, ids in sorted(cites.items()):
        missing = [i for i in ids if i not in known]
        if missing:
            raise SelectionError(f"cites.{field} names signal {missing[0]!r}, which the request does not declare")
    standpoint = standpoint or project.corpus.standpoint
    work_frame = WorkFrame(
        objective=objective,
        work_type=work_type or None,
        constraints=tuple(constraints),
        signals=tuple(signals),
        standpoint=standpoint,
        establishment="declared" if work_type else "unknown",
        cites=tuple((field, tuple(ids)) for field, ids in sorted(cites.items())),
    )
    selection = run_selection(
        project=project,
        query=query,
        work_frame=work_frame,
        budget_tokens=budget_tokens if budget_tokens is not None else settings.FG_DEFAULT_BUDGET,
        condition=condition,
        standpoint=standpoint,
        source=source,
        builder=builder,
        routing=routing,
        user=user,
    )
    report = selection.result.trace.routing
    if report is not None and report.refused:
        raise StrictRoutingRefused(selection)
    return selection


class StrictRoutingRefused(SelectionError):
    """Strict routing produced no bundle; the refusal is traced (`selection.trace`)."""

    def __init__(self, selection: Selection):
        self.selection = selection
        self.status, why = strict_refusal(selection.result.trace.routing)
        super().__init__(f"strict routing refused (trace {selection.trace.pk}): {why}")
