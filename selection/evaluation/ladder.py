"""The evaluation ladder: every task of a corpus under every condition, scored against its ledger and
stored with its audit row (the tables: aggregation.py and documents.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from django.db import transaction

from authority.access import access_evaluate
from authority.audit import audit_record
from authority.selectors import current_frame_version
from selection.engine.builders import BUILDERS, establishment_of
from selection.engine.conditions import CONDITIONS, LADDER, get_condition
from selection.engine.pipeline import ENGINE_VERSION
from selection.evaluation.aggregation import (
    BASELINE,
    BUILDER_CONDITION,
    DECLARED,
    HAZARD_CONDITION,
    HAZARD_METRIC,
    MISASSIGNED,
)
from selection.evaluation.builder_table import (
    ABSTENTION,
    SIDES,
    parse_builders,
)
from selection.evaluation.documents import ScoredRun, builder_document, ladder_document
from selection.evaluation.scoring import ledger_for_task, score_result
from selection.evaluation.task_sets import task_set_digest, task_set_version_record
from selection.memory import store
from selection.models import Corpus, Evaluation, EvaluationRun, Project, Task
from selection.serving.framing import task_work_frame
from selection.serving.selections import SelectionError, replay_task
from selection.traces.recording import TraceEntry, traces_write

ALL_CONDITIONS: tuple[str, ...] = LADDER + ("CO",)
TRACE_SOURCE = "evaluation"
# runs whose traces are written together, in a transaction of their own; an evaluation holds at
# most this many selections' traces in memory (each run keeps its scores and bundle text)
TRACE_BATCH = 256


class EvaluationError(ValueError):
    """An evaluation that cannot run: unknown corpus or condition, no tasks, no promoted frame."""

def parse_conditions(names: str | Iterable[str] | None) -> tuple[str, ...]:
    """Condition names in ladder order, each once; None or "" means the whole ladder and CO."""
    if names is None:
        return ALL_CONDITIONS
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",")]
    chosen = {n for n in names if n}
    if not chosen:
        return ALL_CONDITIONS
    for name in sorted(chosen):
        get_condition(name)  # raises UnknownCondition naming the known ones
    return tuple(n for n in CONDITIONS if n in chosen)


# --- the service -----------------------------------------------------------------------------
def evaluation_run(
    *,
    corpus: Corpus | str,
    conditions: str | Iterable[str] | None = None,
    actor=None,
    builders: str | Iterable[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Evaluation:
    """Replay every task of `corpus` under each condition (plus the hazard's misassigned C6 runs),
    score them against the hidden ledgers, and store the evaluation and its runs in one transaction.

    The runs' traces are written as the runs go, TRACE_BATCH at a time, each batch in its own
    transaction (a project's trace chain is locked only while a batch is appended), so memory holds
    one batch of traces, not every one. A run that fails part-way stores no evaluation; the traces
    it wrote stay, each a whole record of a selection that was made.

    Each project's frame is the version promoted when the run starts, fixed for the whole run.
    The hazard needs both C0 and C6 among `conditions`; without them it is left empty. `actor`
    (None from the command line) must be a lead in one of the corpus's projects.

    `builders` adds the frame-builder table: each task's frame as each builder establishes it from
    the task's signals, run at C6 with abstention (the frame policy) and without it, beside the
    declared frame and C0 (both added to the conditions when missing). `progress(done, total)` is
    called after each task's replays (a job shows it).
    """
    corpus = _corpus(corpus)
    if actor is not None:
        access_evaluate(actor, corpus)  # before any work: a refused run writes nothing
    try:
        names = parse_conditions(conditions)
        chosen_builders = parse_builders(
            list(builders) if builders is not None and not isinstance(builders, str) else builders,
            tuple(BUILDERS),
        )
    except ValueError as error:
        raise EvaluationError(str(error)) from error
    if chosen_builders:
        wanted = set(names) | {BASELINE, BUILDER_CONDITION}
        names = tuple(n for n in CONDITIONS if n in wanted)
    tasks = list(Task.objects.filter(corpus=corpus).select_related("project", "corpus").order_by("position", "uid"))
    if not tasks:
        raise EvaluationError(f'corpus "{corpus.name}" has no tasks to evaluate')
    store.corpus_index(corpus.pk)  # built once; every replay below reuses it
    versions = {}
    projects = {t.project_id: t.project for t in tasks}
    for project in projects.values():
        versions[project.pk] = current_frame_version(project=project)
        if versions[project.pk] is None:
            raise EvaluationError(f'project "{project.slug}" has no promoted frame version')

    # the task set each project's runs replay, by digest now: its version is named when stored
    digests = {pk: task_set_digest(project=project) for pk, project in projects.items()}

    hazard_on = BASELINE in names and HAZARD_CONDITION in names
    runs: list[ScoredRun] = []
    pending: list[ScoredRun] = []
    for done, task in enumerate(tasks, start=1):
        ledger = ledger_for_task(task)
        version = versions[task.project_id]
        plan = [(c, DECLARED, None) for c in names]
        if hazard_on and task.misassigned_work_type:
            plan.append((HAZARD_CONDITION, MISASSIGNED, task.misassigned_work_type))
        scored = [_replay(task, condition, variant, wrong, version, ledger) for condition, variant, wrong in plan]
        for builder in chosen_builders:
            scored.extend(_builder_runs(task, builder, version, ledger, hazard=hazard_on))
        runs.extend(scored)
        pending.extend(scored)
        if len(pending) >= TRACE_BATCH:
            _write_traces(pending)
            pending = []
        if progress is not None:
            progress(done, len(tasks))
    _write_traces(pending)

    with transaction.atomic():
        # one task-set version at a time per project, as a labelling takes them (pk order)
        list(Project.objects.select_for_update().filter(pk__in=projects).order_by("pk"))
        counts = Counter(t.project_id for t in tasks)
        task_sets = {
            pk: task_set_version_record(project=projects[pk], digest=digests[pk], tasks=counts[pk])
            for pk in sorted(projects)
        }
        document = ladder_document(corpus, names, tasks, runs, versions, task_sets)
        if chosen_builders:
            document.update(builder_document(chosen_builders, tasks, runs))
        evaluation = Evaluation.objects.create(
            corpus=corpus, engine_version=ENGINE_VERSION, conditions=list(names), result=document
        )
        evaluation.task_set_versions.set(task_sets.values())
        EvaluationRun.objects.bulk_create(
            [
                EvaluationRun(
                    evaluation=evaluation,
                    task=r.task,
                    condition=r.condition,
                    variant=r.variant,
                    trace_id=r.trace_id,
                    metrics=r.metrics,
                )
                for r in runs
            ],
            batch_size=1000,
        )
        _audit(evaluation, corpus, names, actor)
    return evaluation


def _write_traces(runs: list[ScoredRun]) -> None:
    """The runs' traces in one bulk write (its own transaction); each run keeps its trace id and
    lets its trace go."""
    if not runs:
        return
    traces = traces_write([r.entry for r in runs])
    for run, trace in zip(runs, traces, strict=True):
        run.written(trace.pk)


def _corpus(corpus: Corpus | str) -> Corpus:
    if isinstance(corpus, Corpus):
        return corpus
    found = Corpus.objects.filter(name=corpus).first()
    if found is None:
        raise EvaluationError(f'no corpus "{corpus}"')
    return found


def _replay(task, condition, variant, work_type, version, ledger) -> ScoredRun:
    try:
        selection = replay_task(
            task=task,
            frame_version=version,
            condition=condition,
            work_type=work_type,
            source=TRACE_SOURCE,
            persist=False,
        )
    except SelectionError as error:
        raise EvaluationError(f"{task.uid} under {condition}: {error}") from error
    return _scored(task, selection, version, ledger, condition, variant, work_type)


def _scored(task, selection, version, ledger, condition, variant, work_type, **builder) -> ScoredRun:
    """One replay scored against the task's ledger, with the trace entry to store."""
    score = score_result(task, selection.result, selection.project_frame, ledger)
    entry = TraceEntry(selection.result, task.project, version.number, task, TRACE_SOURCE)
    return ScoredRun(
        task, condition, variant, work_type, score.metrics, score.admitted, score.ecodes(),
        score.losses(), score.should_ecodes(), entry, **builder,
    )


def _builder_runs(task, builder: str, version, ledger, *, hazard: bool = False) -> list[ScoredRun]:
    """The task's frame as `builder` establishes it, run at C6 with and without abstention; with
    `hazard`, also the task's misassigned work type established against the builder's own scores
    and run with abstention (the hazard table's abstention column)."""
    _, project_frame = store.frame_of_version(version.pk, version=version)
    try:
        work_frame = task_work_frame(task=task, builder=builder, project_frame=project_frame)
    except (SelectionError, ValueError) as error:
        raise EvaluationError(f"{task.uid} with the {builder} builder: {error}") from error
    plan = [(f"{builder}:{side}".replace("_", "-"), side, work_frame, side == ABSTENTION) for side in SIDES]
    if hazard and task.misassigned_work_type and builder != "declared":
        thresholds = project_frame.establishment.thresholds_for(builder)
        wrong = establishment_of(work_frame, task.misassigned_work_type, thresholds)
        plan.append((f"{MISASSIGNED}:{builder}", MISASSIGNED, wrong, True))
    runs = []
    for variant, side, frame, abstention in plan:
        try:
            selection = replay_task(
                task=task,
                frame_version=version,
                condition=BUILDER_CONDITION,
                source=TRACE_SOURCE,
                persist=False,
                work_frame=frame,
                abstention=abstention,
            )
        except SelectionError as error:
            raise EvaluationError(f"{task.uid} with the {builder} builder: {error}") from error
        runs.append(
            _scored(
                task, selection, version, ledger, BUILDER_CONDITION, variant, frame.work_type,
                builder=builder, side=side,
            )
        )
    return runs

def _audit(evaluation: Evaluation, corpus: Corpus, names, actor) -> None:
    means = evaluation.result["conditions"]
    audit_record(
        actor=actor,
        project=None,
        action="evaluation.run",
        obj=evaluation,
        summary=f"evaluated {corpus.name} under {', '.join(names)}",
        payload={
            "corpus": corpus.name,
            "conditions": list(names),
            HAZARD_METRIC: {c: round(means[c]["mean"][HAZARD_METRIC], 4) for c in names},
        },
    )
