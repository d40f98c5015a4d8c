"""Establishing a request's work frame with a frame builder: the one path that select, the API,
evaluation and replays take from signals to a WorkFrame."""

from __future__ import annotations

from dataclasses import replace

from selection.engine.builders import (
    BUILDERS,
    BuilderInput,
    BuilderTools,
    Exemplar,
    UnknownBuilder,
    build_work_frame,
)
from selection.engine.builders.common import signals_text
from selection.engine.types import ProjectFrame, WorkFrame, WorkSignal
from selection.memory import store
from selection.models import Project, Task
from selection.serving.query_vectors import embed_queries
from selection.serving.reader_model import completion_client


class FramingError(ValueError):
    """A frame that cannot be established: an unknown builder, or a builder that is switched off."""


DEFAULT = "default"  # declared when the caller gives a work type, else the frame's configured builder


def builder_for(name: str | None, work_frame: WorkFrame, project_frame: ProjectFrame) -> str:
    """The builder a request runs: `name`, or by default declared when a work type is given and
    the project frame's configured builder otherwise."""
    if name in (None, "", DEFAULT):
        return "declared" if work_frame.work_type else project_frame.establishment.builder
    if name not in BUILDERS:
        raise FramingError(f"unknown frame builder {name!r}; known: {', '.join(BUILDERS)}")
    return name


def task_signals(task: Task) -> tuple[WorkSignal, ...]:
    return tuple(
        WorkSignal(id=s.uid, kind=s.kind, content=s.content)
        for s in task.signals.all().order_by("position")
    )


def exemplars_for(project: Project, *, exclude_task_id: int | None) -> tuple[Exemplar, ...]:
    """The project's tasks whose work type a person declared, as neighbours for the similarity
    builder; the task being judged is never among them."""
    tasks = [
        t
        for t in Task.objects.filter(project=project).prefetch_related("signals").order_by("position", "uid")
        if (t.frame or {}).get("work_type") and t.pk != exclude_task_id
    ]
    texts = [signals_text(task_signals(t)) for t in tasks]
    keep = [(t, text) for t, text in zip(tasks, texts, strict=True) if text.strip()]
    vectors = embed_queries([text for _, text in keep]) if keep else []
    return tuple(
        Exemplar(task_id=t.uid, work_type=t.frame["work_type"], vector=tuple(v))
        for (t, _), v in zip(keep, vectors, strict=True)
    )


def work_frame_establish(
    *,
    builder: str,
    project: Project,
    project_frame: ProjectFrame,
    work_frame: WorkFrame,
    task: Task | None = None,
) -> WorkFrame:
    """The WorkFrame `builder` establishes from `work_frame`'s signals (the declared builder keeps
    the caller's frame and refuses a work type the project frame does not list)."""
    if builder not in BUILDERS:
        raise FramingError(f"unknown frame builder {builder!r}; known: {', '.join(BUILDERS)}")
    tools = BuilderTools()
    exemplars: tuple[Exemplar, ...] = ()
    if builder == "similarity":
        tools = BuilderTools(embed=embed_queries)
        exemplars = exemplars_for(project, exclude_task_id=task.pk if task else None)
    elif builder == "model":
        complete = completion_client()
        if complete is None:
            raise FramingError(
                "the model frame builder is off: set FG_READER_MODEL_URL and FG_READER_MODEL_NAME"
            )
        tools = BuilderTools(complete=complete)
    inputs = BuilderInput(
        signals=work_frame.signals,
        project_frame=project_frame,
        standpoint=work_frame.standpoint,
        declared=work_frame if builder == "declared" else None,
        task_id=task.uid if task else None,
        exemplars=exemplars,
    )
    try:
        built = build_work_frame(builder, inputs, tools)
    except UnknownBuilder as error:
        raise FramingError(str(error)) from error
    if builder != "declared" and work_frame.objective:
        # a declared objective stays the caller's; the builder only writes one when none is given
        cites = tuple((f, ids) for f, ids in built.cites if f != "objective")
        cites += tuple((f, ids) for f, ids in work_frame.cites if f == "objective")
        built = replace(built, objective=work_frame.objective, objective_by="declared", cites=tuple(sorted(cites)))
    return built


def task_work_frame(*, task: Task, builder: str, project_frame: ProjectFrame) -> WorkFrame:
    """A corpus task's work frame as `builder` establishes it: the declared builder reads the
    task's declared frame; any other sees only the task's signals (its declared frame stays
    hidden, as it would be from an agent that declares nothing)."""
    if builder == "declared":
        return store.work_frame_for_task(task)
    signals_only = WorkFrame(
        signals=task_signals(task),
        standpoint=task.standpoint or task.corpus.standpoint,
        establishment="unknown",
        objective_by="",
    )
    return work_frame_establish(
        builder=builder,
        project=task.project,
        project_frame=project_frame,
        work_frame=signals_only,
        task=task,
    )


__all__ = ["DEFAULT", "FramingError", "builder_for", "task_work_frame", "work_frame_establish"]
