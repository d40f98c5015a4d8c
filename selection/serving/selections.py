"""Selections run: resolve the inputs, run the engine, persist the trace; replay a task or a trace.

`selection_run` is the one function that builds a selection request from resolved inputs and runs
the engine: the page, the command, evaluations, backtest replays, verification, counterfactuals,
then-and-now and the bench all reach the engine through it. The trace rows are written by
selection/traces/recording.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction

from authority import access
from authority.audit import audit_record
from authority.selectors import current_frame_version
from selection import telemetry
from selection.engine.errors import SelectionError
from selection.engine.index import CorpusIndex
from selection.engine.outputs import SelectionResult
from selection.engine.pipeline import select
from selection.engine.policy import UnknownWorkType
from selection.engine.routing.types import RoutingInputs
from selection.engine.timings import StageTimings, TimedStage, timed
from selection.engine.types import EngineConfig, ProjectFrame, SelectionRequest, Unit, WorkFrame
from selection.evaluation.scoring import ledger_for_task
from selection.memory import store
from selection.models import Project, Task, Trace
from selection.serving.framing import FramingError, builder_for, work_frame_establish
from selection.serving.query_vectors import embed_queries, embed_query
from selection.traces.recording import trace_write


@dataclass(frozen=True)
class SelectionInputs:
    """What a selection is made from, resolved: the frame in force, the work frame, the request.

    Every interface resolves its own arguments (a task, a stored trace, a command line, a form)
    into this and hands it to `selection_run`; nothing else builds an engine request.
    """

    project_frame: ProjectFrame
    work_frame: WorkFrame
    query: str
    budget_tokens: int
    condition: str = "C6"
    standpoint: datetime | None = None
    ledger: dict[str, str] | None = None  # only the oracle (CO) reads it
    use_dense: bool = True
    # declared routing inputs (task category, path scope, overlays, strict, no_local)
    routing: RoutingInputs = field(default_factory=RoutingInputs)
    local_units: tuple[Unit, ...] = ()  # the requesting user's local overlay; empty under no_local
    # the query's and the objective's vectors when the caller holds them (a generated corpus whose
    # vectors no model made); None: selection_request embeds the texts
    query_vector: tuple[float, ...] | None = None
    objective_vector: tuple[float, ...] | None = None


def selection_request(
    inputs: SelectionInputs, index: CorpusIndex, *, timings: StageTimings | None = None
) -> SelectionRequest:
    """The engine request for `inputs`: query and objective embedded (each alone, once per process),
    unless `inputs` carries their vectors."""
    query_vector = objective_vector = None
    if inputs.use_dense and index.dense is not None and inputs.query_vector is not None:
        query_vector, objective_vector = inputs.query_vector, inputs.objective_vector
    elif inputs.use_dense and index.dense is not None:
        with timed(timings, TimedStage.EMBED):
            if inputs.work_frame.objective:
                query_vector, objective_vector = embed_queries([inputs.query, inputs.work_frame.objective])
            else:
                query_vector = embed_query(inputs.query)
    return SelectionRequest(
        project_frame=inputs.project_frame,
        work_frame=inputs.work_frame,
        query=inputs.query,
        budget_tokens=inputs.budget_tokens,
        condition=inputs.condition,
        standpoint=inputs.standpoint,
        query_vector=query_vector,
        objective_vector=objective_vector,
        ledger=inputs.ledger,
        routing=inputs.routing,
        local_units=inputs.local_units,
    )


def selection_run(
    inputs: SelectionInputs,
    index: CorpusIndex,
    *,
    config: EngineConfig | None = None,
    timings: StageTimings | None = None,
) -> SelectionResult:
    """Build the request and run the engine: the one path from resolved inputs to a result.

    `timings`, when given, records the embeddings, select() whole and the engine's own stages.
    """
    request = selection_request(inputs, index, timings=timings)
    try:
        with timed(timings, TimedStage.SELECT):
            return select(request, index, config, timings=timings)
    except SelectionError:
        raise  # an unknown work type, already the domain's error
    except ValueError as error:
        raise SelectionError(str(error)) from error


@dataclass(frozen=True)
class Selection:
    result: SelectionResult
    trace: Trace | None
    project_frame: ProjectFrame


def frame_for(project: Project, frame_version=None):
    """(number, engine ProjectFrame) of a FrameVersion, or of the current promoted one."""
    version = frame_version or current_frame_version(project=project)
    if version is None:
        raise SelectionError(f'project "{project.slug}" has no promoted frame version')
    return store.frame_of_version(version.pk, version=version)


def work_frame_built(
    *,
    builder: str,
    work_frame: WorkFrame,
    project: Project | None,
    project_frame: ProjectFrame,
    task: Task | None = None,
) -> WorkFrame:
    """The WorkFrame `builder` establishes from `work_frame`'s signals ("default": declared when a
    work type is given, else the frame's configured builder); a framing failure is a SelectionError."""
    try:
        return work_frame_establish(
            builder=builder_for(builder, work_frame, project_frame),
            project=project,
            project_frame=project_frame,
            work_frame=work_frame,
            task=task,
        )
    except FramingError as error:
        raise SelectionError(str(error)) from error


@telemetry.traced_selection
def run_selection(
    *,
    project: Project,
    query: str,
    work_frame: WorkFrame,
    budget_tokens: int,
    condition: str = "C6",
    frame_version=None,
    standpoint: datetime | None = None,
    task: Task | None = None,
    ledger: dict[str, str] | None = None,
    source: str = "select",
    persist: bool = True,
    use_dense: bool = True,
    builder: str | None = None,
    abstention: bool = True,
    timings: StageTimings | None = None,
    routing: RoutingInputs | None = None,
    user=None,
) -> Selection:
    """Select context for one request through the engine and (by default) write its trace.

    `builder` establishes the work frame from its signals first ("default": declared when a work
    type is given, else the frame's configured builder); None runs `work_frame` as given (replays
    of a stored frame). `abstention=False` runs every frame at full strength, whatever its
    establishment (the evaluation's "no abstention" column). `timings` records what selection_run
    records, and the trace write. `routing` carries the declared routing inputs (task category,
    path scope, overlays, strict, no_local) as one frozen RoutingInputs; every interface (command,
    API, evaluation, replay) passes the same type. Under `routing.strict` an incomplete or
    conflicted request gives an empty bundle whose trace says why
    (`result.trace.routing.refused`). `user`: whose local overlay units join the request, unless
    `routing.no_local`.
    """
    routing = routing or RoutingInputs()
    number, project_frame = frame_for(project, frame_version)
    if builder is not None:
        work_frame = work_frame_built(
            builder=builder, work_frame=work_frame, project=project, project_frame=project_frame, task=task
        )
    if (
        work_frame.establishment == "declared"
        and work_frame.work_type is not None
        and not project_frame.lists(work_frame.work_type)
    ):
        raise UnknownWorkType.of(project_frame, work_frame.work_type)
    index = store.corpus_index(project.corpus_id)
    inputs = SelectionInputs(
        project_frame=project_frame,
        work_frame=work_frame,
        query=query,
        budget_tokens=budget_tokens,
        condition=condition,
        standpoint=standpoint,
        ledger=ledger,
        use_dense=use_dense,
        routing=routing,
        local_units=store.local_units_for(user=user, project=project) if not routing.no_local else (),
    )
    result = selection_run(inputs, index, config=EngineConfig(abstention=abstention), timings=timings)
    trace = None
    if persist:
        with timed(timings, TimedStage.TRACE_WRITE):
            trace = trace_write(
                result,
                project=project,
                frame_version=number,
                task=task,
                source=source,
                memory_sequence=getattr(index, "memory_sequence", None),
            )
    return Selection(result=result, trace=trace, project_frame=project_frame)


def replay_task(
    *,
    task: Task,
    frame_version=None,
    condition: str = "C6",
    work_type: str | None = None,
    source: str = "evaluation",
    persist: bool = True,
    work_frame: WorkFrame | None = None,
    abstention: bool = True,
) -> Selection:
    """Replay one corpus task: its declared work frame (another work type, or a frame a builder
    established from its signals), query and budget."""
    if work_frame is None:
        work_frame = store.work_frame_for_task(task, work_type=work_type)
    return run_selection(
        project=task.project,
        query=task.query,
        work_frame=work_frame,
        budget_tokens=task.budget_tokens,
        condition=condition,
        frame_version=frame_version,
        standpoint=task.standpoint,
        task=task,
        # only the oracle reads the ledger; no other condition is handed it
        ledger=ledger_for_task(task) if condition == "CO" else None,
        source=source,
        persist=persist,
        abstention=abstention,
        routing=store.routing_inputs_for_task(task),
    )


def trace_replay(*, trace: Trace, actor, source: str = "replay") -> Trace:
    """Replay a stored trace's work frame, query, budget, standpoint and condition under today's
    promoted frame; the new trace and its audit entry are written together. Needs a lead or a
    reviewer of the trace's project (authority.access.access_replay)."""
    access.access_replay(actor, trace.project)
    engine_trace = store.trace_result(trace).trace
    ledger = None
    if engine_trace.condition == "CO" and trace.task_id:
        ledger = ledger_for_task(trace.task)
    with transaction.atomic():
        selection = run_selection(
            project=trace.project,
            query=engine_trace.query,
            work_frame=engine_trace.work_frame,
            budget_tokens=engine_trace.budget_tokens,
            condition=engine_trace.condition,
            standpoint=engine_trace.standpoint,
            task=trace.task,
            ledger=ledger,
            source=source,
            use_dense=engine_trace.retriever.dense != "none",
            abstention=engine_trace.config.abstention,
            # the routing inputs as declared; a replay passes no user, so no local overlay units
            routing=engine_trace.routing.inputs if engine_trace.routing else None,
        )
        audit_record(
            actor=actor,
            project=trace.project,
            action="trace.replayed",
            obj=selection.trace,
            summary=(
                f"trace {trace.pk} replayed under frame v{selection.trace.frame_version}"
                f" as trace {selection.trace.pk}"
            ),
            payload={"from_trace": trace.pk, "to_trace": selection.trace.pk},
        )
    return selection.trace
