"""The stored evaluation document: the ladder's tables built from its scored runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from selection.engine.conditions import CONDITIONS
from selection.engine.metrics import METRICS, prefix_stability
from selection.engine.pipeline import ENGINE_VERSION
from selection.engine.types import WorkFrame
from selection.evaluation.aggregation import (
    BASELINE,
    BUILDER_CONDITION,
    DECLARED,
    HAZARD_CONDITION,
    HAZARD_METRIC,
    MISASSIGNED,
    ecode_counts,
    hazard_table,
    mean_metrics,
    pair_overlaps,
    stage_losses,
)
from selection.evaluation.builder_table import (
    ABSTENTION,
    NO_ABSTENTION,
    SIDES,
    accuracy,
    builder_hazard,
    builder_side,
    c0_shortfalls,
    establishment_counts,
)
from selection.models import Task
from selection.traces.recording import TraceEntry


@dataclass
class ScoredRun:
    """One replay of one task under one condition and variant, scored; `trace_id` set once written.

    What the documents read of the selection (its work frame, the condition it ran as, the bundle's
    text) is kept here; the trace entry itself is let go once written (`written`), so that an
    evaluation holds one batch of traces at a time, not every one."""

    task: Task
    condition: str
    variant: str
    work_type: str | None
    metrics: dict[str, float]
    admitted: tuple[str, ...]
    ecodes: dict[str, str]
    losses: dict[str, int]
    should_ecodes: dict[str, str]
    entry: TraceEntry | None
    trace_id: int | None = field(default=None)
    builder: str | None = None  # set on a frame-builder run, with its side
    side: str | None = None
    work_frame: WorkFrame | None = None
    effective_condition: str = ""
    rendered: str = ""

    def __post_init__(self) -> None:
        if self.entry is not None:
            trace = self.entry.result.trace
            self.work_frame = trace.work_frame
            self.effective_condition = trace.effective_condition
            self.rendered = self.entry.result.bundle.rendered

    def written(self, trace_id: int) -> None:
        self.trace_id, self.entry = trace_id, None

    @property
    def establishment(self) -> str:
        return self.work_frame.establishment

    def row(self) -> dict:
        return {
            **self.metrics,
            "admitted": list(self.admitted),
            "ecodes": dict(self.ecodes),
            "losses": dict(self.losses),
            "should_ecodes": dict(self.should_ecodes),
            "trace": self.trace_id,
        }


def builder_document(builders, tasks, runs: Sequence[ScoredRun]) -> dict:
    """`builders` (one row per builder and side), `builder_details` (establishment counts, C0 beside each
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
        frames = {r.task.uid: r.work_frame for r in own if r.side == ABSTENTION}
        ran_as = {r.task.uid: r.effective_condition for r in own if r.side == ABSTENTION}
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


def ladder_document(corpus, names, tasks, runs: Sequence[ScoredRun], versions, task_sets) -> dict:
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
                slug: [declared[(t.uid, c)].rendered for t in seq]
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
        # the version of each project's task set the runs replayed (selection.evaluation.task_sets)
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
