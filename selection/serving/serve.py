"""A selection asked for by a person, an agent, an operator or the bench: the checks, then the one service.

Anyone who may read a project may select from it (the trace records the read); the oracle CO is
refused, since it reads a task's hidden ledger. The API and MCP call select_for_user, the `select`
command calls select_in_project; both end in selections.run_selection, the path every other
interface takes. A corpus its caller holds in memory (HeldCorpus, the bench's generated corpora)
passes the same checks and ends in selections.selection_run, with no database read or written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.shortcuts import get_object_or_404

from authority import access
from selection.engine.conditions import UnknownCondition, get_condition
from selection.engine.index import CorpusIndex
from selection.engine.routing.report import strict_refusal
from selection.engine.routing.types import RoutingInputs
from selection.engine.timings import StageTimings
from selection.engine.types import SIGNAL_KINDS, EngineConfig, ProjectFrame, WorkFrame, WorkSignal
from selection.models import Project
from selection.serving.framing import FramingError, builder_for
from selection.serving.selections import (
    Selection,
    SelectionError,
    SelectionInputs,
    run_selection,
    selection_run,
    work_frame_built,
)

ORACLE = "CO"
API_SOURCE = "api"


@dataclass(frozen=True)
class HeldCorpus:
    """A corpus its caller holds in memory, selected from without the database: each project's
    frame by slug, the index, the vectors of every query it is asked (the query's and its
    objective's, as the holder made them: no model runs), its standpoint and engine configuration.
    Nobody holds a role in it and no trace of it is written."""

    frames: Mapping[str, ProjectFrame]
    index: CorpusIndex
    vectors: Mapping[str, tuple[tuple[float, ...], tuple[float, ...] | None]]
    standpoint: datetime | None = None
    config: EngineConfig | None = None


def select_for_user(*, user, project_slug: str, held: HeldCorpus | None = None, **request) -> Selection:
    """Select for `user` in one project (its slug), once the user's role lets them read it.

    Raises Http404 (no such project), AccessDenied (no role in it), and whatever
    select_in_project raises; `request` is select_in_project's keywords. `held`: the project is one
    of a corpus the caller holds (HeldCorpus): no role is checked, the selection runs on its index
    with its vectors and configuration, and no trace is written (`selection.trace` is None).
    """
    if held is not None:
        if project_slug not in held.frames:
            raise SelectionError(f'no project "{project_slug}" in the held corpus')
        return select_in_project(project=None, held=(held, project_slug), user=user, **request)
    project = get_object_or_404(Project.objects.select_related("corpus"), slug=project_slug)
    access.access_read(user, project)
    return select_in_project(project=project, user=user, **request)


def select_in_project(
    *,
    project: Project | None,
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
    timings: StageTimings | None = None,
    held: tuple[HeldCorpus, str] | None = None,
) -> Selection:
    """Select in `project`; the query is the signals' contents when none is given.

    Raises SelectionError (a request the engine cannot run: no query nor signal, an unknown
    condition or cited signal, the oracle, an unknown builder or work type), StrictRoutingRefused
    (strict routing found the request incomplete, ambiguous, invalid or conflicted; its trace is
    stored and named).

    `builder` establishes the work frame from the signals ("default": declared when a work type is
    given, else the frame's configured builder); `routing` carries the routing inputs, and the
    user's local overlay units join the request unless `routing.no_local`. `timings` records the
    stages selection_run records (and the trace write): the bench's clock. `held`: a held corpus
    and the slug of its project, selected from in place of `project` (select_for_user's `held`).
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
    standpoint = standpoint or (held[0].standpoint if held is not None else project.corpus.standpoint)
    work_frame = WorkFrame(
        objective=objective,
        work_type=work_type or None,
        constraints=tuple(constraints),
        signals=tuple(signals),
        standpoint=standpoint,
        establishment="declared" if work_type else "unknown",
        cites=tuple((field, tuple(ids)) for field, ids in sorted(cites.items())),
    )
    budget_tokens = budget_tokens if budget_tokens is not None else settings.FG_DEFAULT_BUDGET
    if held is not None:
        selection = _held_selection(
            *held,
            query=query,
            work_frame=work_frame,
            budget_tokens=budget_tokens,
            condition=condition,
            standpoint=standpoint,
            builder=builder,
            routing=routing,
            timings=timings,
        )
    else:
        selection = run_selection(
            project=project,
            query=query,
            work_frame=work_frame,
            budget_tokens=budget_tokens,
            condition=condition,
            standpoint=standpoint,
            source=source,
            builder=builder,
            routing=routing,
            user=user,
            timings=timings,
        )
    report = selection.result.trace.routing
    if report is not None and report.refused:
        raise StrictRoutingRefused(selection)
    return selection


def _held_selection(
    held: HeldCorpus,
    project_slug: str,
    *,
    query: str,
    work_frame: WorkFrame,
    budget_tokens: int,
    condition: str,
    standpoint: datetime | None,
    builder: str,
    routing: RoutingInputs | None,
    timings: StageTimings | None,
) -> Selection:
    """run_selection's work on a held corpus: its frame, the work frame established by the
    builder, its index and vectors; nothing read from or written to the database."""
    project_frame = held.frames[project_slug]
    try:
        builder = builder_for(builder, work_frame, project_frame)
    except FramingError as error:
        raise SelectionError(str(error)) from error
    if builder == "similarity":
        raise SelectionError("the similarity builder reads the project's past tasks: a held corpus has none")
    work_frame = work_frame_built(builder=builder, work_frame=work_frame, project=None, project_frame=project_frame)
    if query not in held.vectors:
        raise SelectionError("the held corpus has no vectors for this query")
    query_vector, objective_vector = held.vectors[query]
    inputs = SelectionInputs(
        project_frame=project_frame,
        work_frame=work_frame,
        query=query,
        budget_tokens=budget_tokens,
        condition=condition,
        standpoint=standpoint,
        routing=routing or RoutingInputs(),
        query_vector=query_vector,
        objective_vector=objective_vector,
    )
    result = selection_run(inputs, held.index, config=held.config, timings=timings)
    return Selection(result=result, trace=None, project_frame=project_frame)


class StrictRoutingRefused(SelectionError):
    """Strict routing produced no bundle; the refusal is traced (`selection.trace`; none on a held corpus)."""

    def __init__(self, selection: Selection):
        self.selection = selection
        self.status, why = strict_refusal(selection.result.trace.routing)
        traced = f" (trace {selection.trace.pk})" if selection.trace is not None else ""
        super().__init__(f"strict routing refused{traced}: {why}")
