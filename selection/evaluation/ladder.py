"""The evaluation ladder: every task of a corpus under every condition, scored against its ledger.

The aggregation helpers at the top are pure (plain mappings in, plain mappings out, no ORM), so the
numbers a reader sees can be checked by hand; `evaluation_run` replays, scores and stores them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from django.db import transaction

from authority.access import access_evaluate
from authority.audit import audit_record
from authority.selectors import current_frame_version
from selection.engine.attribution import LOSS_STAGES, FailureCode
from selection.engine.builders import BUILDERS, establishment_of
from selection.engine.conditions import CONDITIONS, LADDER, get_condition
from selection.engine.metrics import METRICS, overlap, prefix_stability
from selection.engine.pipeline import ENGINE_VERSION
from selection.evaluation.builder_table import (
    ABSTENTION,
    NO_ABSTENTION,
    SIDES,
    accuracy,
    builder_hazard,
    builder_side,
    c0_shortfalls,
    establishment_counts,
    parse_builders,
)
from selection.evaluation.scoring import ledger_for_task, score_result
from selection.evaluation.task_sets import task_set_digest, task_set_version_record
from selection.memory import store
from selection.models import Corpus, Evaluation, EvaluationRun, Project, Task
from selection.serving.framing import task_work_frame
from selection.serving.selections import SelectionError, replay_task
from selection.traces.recording import TraceEntry, traces_write

ALL_CONDITIONS: tuple[str, ...] = LADDER + ("CO",)
ORACLE = "CO"
BASELINE = "C0"  # the hazard table's query-only reference
HAZARD_CONDITION = "C6"  # the misassigned run: the full builder under the wrong work type
HAZARD_METRIC = "must_include_recall"
BUILDER_CONDITION = "C6"  # a built frame runs under the full builder, as a declared one does
DECLARED, MISASSIGNED = "declared", "misassigned"
ECODES: tuple[str, ...] = tuple(code.value for code in FailureCode)
TRACE_SOURCE = "evaluation"


class EvaluationError(ValueError):
    """An evaluation that cannot run: unknown corpus or condition, no tasks, no promoted frame."""


# --- pure aggregation ------------------------------------------------------------------------


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


def mean_metrics(per_task: Mapping[str, Mapping[str, float]], metrics: Sequence[str] = METRICS) -> dict[str, float]:
    """The mean of each metric over tasks (0.0 for every metric when there is no task)."""
    n = len(per_task)
    return {m: (math.fsum(t[m] for t in per_task.values()) / n if n else 0.0) for m in metrics}


def pair_overlaps(
    pairs: Mapping[str, Sequence[str]],
    admitted: Mapping[str, Mapping[str, Collection[str]]],
) -> dict[str, dict[str, float]]:
    """pair -> condition -> overlap of the pair's admitted sets (`admitted[condition][task]`).

    A pair of two tasks is their Jaccard; a pair key shared by more tasks gets the mean over every
    two of them. Pairs with fewer than two tasks are left out: nothing is compared.
    """
    table: dict[str, dict[str, float]] = {}
    for pair, task_ids in sorted(pairs.items()):
        if len(task_ids) < 2:
            continue
        row = {}
        for condition, by_task in admitted.items():
            values = [overlap(by_task[a], by_task[b]) for a, b in combinations(task_ids, 2)]
            row[condition] = math.fsum(values) / len(values)
        table[pair] = row
    return table


def hazard_table(
    misassigned: Mapping[str, tuple[str, float]],
    declared: Mapping[str, float],
    baseline: Mapping[str, float],
) -> dict[str, dict[str, float | str | bool]]:
    """task -> its declared-frame, misassigned-frame and query-only (C0) values of one metric.

    `misassigned` maps each task to (the wrong work type, the value under it); `worse_than_C0` says
    whether the wrong frame selects worse than no frame at all.
    """
    return {
        task: {
            "work_type": work_type,
            "declared": declared[task],
            "misassigned": value,
            BASELINE: baseline[task],
            "damage": declared[task] - value,
            f"worse_than_{BASELINE}": value < baseline[task],
        }
        for task, (work_type, value) in sorted(misassigned.items())
    }


def stage_losses(losses_by_task: Mapping[str, Mapping[str, int]]) -> dict:
    """Recall at every stage: MUST units summed over tasks, how many each stage lost and its share
    of them (`recalled` is the share that reached the bundle, folded units included)."""
    counts = dict.fromkeys(LOSS_STAGES, 0)
    for losses in losses_by_task.values():
        for stage, n in losses.items():
            counts[stage] += n
    must = sum(counts.values())
    return {
        "must": must,
        "counts": counts,
        "shares": {stage: (n / must if must else 0.0) for stage, n in counts.items()},
    }


def ecode_counts(ecodes_by_task: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
    """How many units got each E-code across tasks; every code E0..E6 present, zero included."""
    counts = Counter(code for codes in ecodes_by_task.values() for code in codes.values())
    return {code: counts.get(code, 0) for code in ECODES}


# --- the service -----------------------------------------------------------------------------


@dataclass
class _Run:
    """One replay of one task under one condition and variant, scored; `trace` set once written."""

    task: Task
    condition: str
    variant: str
    work_type: str | None
    metrics: dict[str, float]
    admitted: tuple[str, ...]
    ecodes: dict[str, str]
    losses: dict[str, int]
    should_ecodes: dict[str, str]
    entry: TraceEntry
    trace_id: int | None = field(default=None)
    builder: str | None = None  # set on a frame-builder run, with its side
    side: str | None = None

    @property
    def establishment(self) -> str:
        return self.entry.result.trace.work_frame.establishment

    def row(self) -> dict:
        return {
            **self.metrics,
            "admitted": list(self.admitted),
            "ecodes": dict(self.ecodes),
            "losses": dict(self.losses),
            "should_ecodes": dict(self.should_ecodes),
            "trace": self.trace_id,
        }


def evaluation_run(
    *,
    corpus: Corpus | str,
    conditions: str | Iterable[str] | None = None,
    actor=None,
    builders: str | Iterable[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Evaluation:
    """Replay every task of `corpus` under each condition (plus the hazard's misassigned C6 runs),
    score them against the hidden ledgers, and store the evaluation, its runs and their traces in
    one transaction.

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
    runs: list[_Run] = []
    for task in tasks:
        ledger = ledger_for_task(task)
        version = versions[task.project_id]
        plan = [(c, DECLARED, None) for c in names]
        if hazard_on and task.misassigned_work_type:
            plan.append((HAZARD_CONDITION, MISASSIGNED, task.misassigned_work_type))
        for condition, variant, work_type in plan:
            runs.append(_replay(task, condition, variant, work_type, version, ledger))
        for builder in chosen_builders:
            runs.extend(_builder_runs(task, builder, version, ledger, hazard=hazard_on))
        if progress is not None:
            progress(len({r.task.pk for r in runs}), len(tasks))

    with transaction.atomic():
        # one task-set version at a time per project, as a labelling takes them (pk order)
        list(Project.objects.select_for_update().filter(pk__in=projects).order_by("pk"))
        counts = Counter(t.project_id for t in tasks)
        task_sets = {
            pk: task_set_version_record(project=projects[pk], digest=digests[pk], tasks=counts[pk])
            for pk in sorted(projects)
        }
        traces = traces_write([r.entry for r in runs])
        for run, trace in zip(runs, traces, strict=True):
            run.trace_id = trace.pk
        document = _document(corpus, names, tasks, runs, versions, task_sets)
        if chosen_builders:
            document.update(_builder_document(chosen_builders, tasks, runs))
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
            ]
        )
        _audit(evaluation, corpus, names, actor)
    return evaluation


def _corpus(corpus: Corpus | str) -> Corpus:
    if isinstance(corpus, Corpus):
        return corpus
    found = Corpus.objects.filter(name=corpus).first()
    if found is None:
        raise EvaluationError(f'no corpus "{corpus}"')
    return found


def _replay(task, condition, variant, work_type, version, ledger) -> _Run:
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


def _scored(task, selection, version, ledger, condition, variant, work_type, **builder) -> _Run:
    """One replay scored against the task's ledger, with the trace entry to store."""
    score = score_result(task, selection.result, selection.project_frame, ledger)
    entry = TraceEntry(selection.result, task.project, version.number, task, TRACE_SOURCE)
    return _Run(
        task, condition, variant, work_type, score.metrics, score.admitted, score.ecodes(),
        score.losses(), score.should_ecodes(), entry, **builder,
    )


def _builder_runs(task, builder: str, version, ledger, *, hazard: bool = False) -> list[_Run]:
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


def _builder_document(builders, tasks, runs: Sequence[_Run]) -> dict:
    """`builders` (the issue's shape), `builder_details` (establishment counts, C0 beside each
    task, shortfalls, traces) and `builder_hazard` (what each builder's misreadings cost)."""
    declared = {(r.task.uid, r.condition): r for r in runs if r.variant == DECLARED}
    declared_type = {t.uid: (t.frame or {}).get("work_type") for t in tasks}
    baseline = {t.uid: declared[(t.uid, BASELINE)].metrics[HAZARD_METRIC] for t in tasks}
    declared_recall = {
        t.uid: declared[(t.uid, BUILDER_CONDITION)].metrics[HAZARD_METRIC] for t in tasks
    }
    table, details, hazard, misassigned_hazard = {}, {}, {}, {}
    # the hazard's misassigned frames at full strength (today's hazard table), for the side by side
    misassigned_full = {
        r.task.uid: r.metrics[HAZARD_METRIC] for r in runs if r.variant == MISASSIGNED
    }
    for builder in builders:
        own = [r for r in runs if r.builder == builder]
        sides = {
            side: {
                r.task.uid: {
                    "work_type": r.work_type,
                    "establishment": r.establishment,
                    "metrics": r.metrics,
                }
                for r in own
                if r.side == side
            }
            for side in SIDES
        }
        shaped = {side: builder_side(sides[side], METRICS) for side in SIDES}
        chosen = {t: row["work_type"] for t, row in shaped[NO_ABSTENTION]["tasks"].items()}
        table[builder] = {"accuracy": accuracy(chosen, declared_type), **shaped}
        frames = {r.task.uid: r.entry.result.trace.work_frame for r in own if r.side == ABSTENTION}
        ran_as = {
            r.task.uid: r.entry.result.trace.effective_condition for r in own if r.side == ABSTENTION
        }
        details[builder] = {
            "condition": BUILDER_CONDITION,
            "establishment_counts": establishment_counts(shaped[ABSTENTION]["tasks"]),
            "tasks": {
                t: {
                    "declared_work_type": declared_type[t],
                    "runner_up": frames[t].runner_up,
                    "margin": frames[t].margin,
                    "plausible_work_types": list(frames[t].plausible_work_types),
                    "confidence_bar": frames[t].confidence_bar,
                    "calibration": frames[t].calibration,
                    "effective_condition": ran_as[t],
                    "C0": baseline[t],
                    "declared": declared_recall[t],
                    "traces": {
                        r.side: r.trace_id for r in own if r.task.uid == t
                    },
                }
                for t in sorted(frames)
            },
            "below_C0_by_more_than_0.05": {
                side: c0_shortfalls(shaped[side]["tasks"], baseline) for side in SIDES
            },
        }
        hazard[builder] = builder_hazard(
            {side: shaped[side]["tasks"] for side in SIDES}, declared_type, declared_recall, baseline
        )
        guarded = [r for r in own if r.side == MISASSIGNED]
        if guarded:
            misassigned_hazard[builder] = {
                r.task.uid: {
                    "work_type": r.work_type,
                    "establishment": r.establishment,
                    "declared": declared_recall[r.task.uid],
                    "no_abstention": misassigned_full[r.task.uid],
                    "abstention": r.metrics[HAZARD_METRIC],
                    BASELINE: baseline[r.task.uid],
                    "trace": r.trace_id,
                }
                for r in sorted(guarded, key=lambda r: r.task.uid)
            }
    return {
        "builders": table,
        "builder_details": details,
        "builder_hazard": hazard,
        "hazard_abstention": misassigned_hazard,
    }


def _document(corpus, names, tasks, runs: Sequence[_Run], versions, task_sets) -> dict:
    """The `evaluate --json` document (see docs/results.md for its keys)."""
    declared = {(r.task.uid, r.condition): r for r in runs if r.variant == DECLARED}
    conditions = {}
    for c in names:
        per_task = {t.uid: declared[(t.uid, c)].row() for t in tasks}
        conditions[c] = {
            "label": CONDITIONS[c].label,
            "mean": mean_metrics(per_task),
            "ecode_counts": ecode_counts({tid: row["ecodes"] for tid, row in per_task.items()}),
            "stage_losses": stage_losses({tid: row["losses"] for tid, row in per_task.items()}),
            "should_ecode_counts": ecode_counts(
                {tid: row["should_ecodes"] for tid, row in per_task.items()}
            ),
            "tasks": per_task,
        }
    pairs: dict[str, list[str]] = {}
    for t in tasks:
        if t.pair:
            pairs.setdefault(t.pair, []).append(t.uid)
    admitted = {c: {t.uid: declared[(t.uid, c)].admitted for t in tasks} for c in names}
    wrong = {r.task.uid: r for r in runs if r.variant == MISASSIGNED}
    hazard = hazard_table(
        {tid: (r.work_type, r.metrics[HAZARD_METRIC]) for tid, r in wrong.items()},
        {tid: declared[(tid, HAZARD_CONDITION)].metrics[HAZARD_METRIC] for tid in wrong},
        {tid: declared[(tid, BASELINE)].metrics[HAZARD_METRIC] for tid in wrong},
    )
    sequences: dict[str, list[Task]] = {}
    for t in tasks:  # tasks come in corpus order: each project's tasks form one sequence
        sequences.setdefault(t.project.slug, []).append(t)
    stability = {
        c: prefix_stability(
            {
                slug: [declared[(t.uid, c)].entry.result.bundle.rendered for t in seq]
                for slug, seq in sequences.items()
            }
        )
        for c in names
    }
    return {
        "corpus": corpus.name,
        "engine_version": ENGINE_VERSION,
        "embedding_model": corpus.embedding_model,
        "metrics": list(METRICS),
        "condition_order": list(names),
        "frames": {t.project.slug: versions[t.project_id].number for t in sorted(tasks, key=lambda t: t.project.slug)},
        # the version of each project's task set the runs replayed (selection.tasksets)
        "task_sets": {
            t.project.slug: task_sets[t.project_id].number for t in sorted(tasks, key=lambda t: t.project.slug)
        },
        "task_info": {
            t.uid: {
                "project": t.project.slug,
                "family": t.family,
                "pair": t.pair,
                "work_type": (t.frame or {}).get("work_type"),
                "misassigned_work_type": t.misassigned_work_type,
                "budget_tokens": t.budget_tokens,
            }
            for t in tasks
        },
        "conditions": conditions,
        "pairs": pair_overlaps(pairs, admitted),
        "hazard": hazard,
        "hazard_metric": HAZARD_METRIC,
        "hazard_condition": HAZARD_CONDITION,
        "misassigned": {tid: {"work_type": r.work_type, **r.row()} for tid, r in sorted(wrong.items())},
        "ecode_counts": {c: conditions[c]["ecode_counts"] for c in names},
        "stage_losses": {c: conditions[c]["stage_losses"] for c in names},
        # consecutive selections of one project's task sequence: the share of each bundle that
        # repeats the start of the one before (the prompt-cache prefix)
        "prefix_stability": stability,
    }


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
