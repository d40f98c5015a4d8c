"""Reads of stored evaluations: the tables and chart series the evaluation pages show.

Everything is derived from the stored `Evaluation.result` document, so a page shows exactly what
`evaluate --json` wrote; nothing is recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Prefetch, QuerySet

from selection.evaluation.aggregation import BASELINE, ECODES, ORACLE
from selection.models import Corpus, Evaluation, TaskSetVersion

METRIC_LABELS = {
    "must_include_recall": "must-include recall",
    "precision": "precision",
    "leakage": "leakage",
    "harmful_admission": "harmful admission",
    "redundancy": "redundancy",
    "tokens": "tokens",
}


def corpus_for_name(*, name: str) -> Corpus:
    return Corpus.objects.get(name=name)


def corpus_evaluations(*, corpus: Corpus) -> QuerySet[Evaluation]:
    """Newest first, without the (large) result document; `run_count` annotated, the task-set
    versions they ran on prefetched (see `evaluation_task_sets`)."""
    return (
        Evaluation.objects.filter(corpus=corpus)
        .defer("result")
        .annotate(run_count=Count("runs"))
        .prefetch_related(Prefetch("task_set_versions", TaskSetVersion.objects.select_related("project")))
        .order_by("-created_at", "-id")
    )


def evaluation_task_sets(evaluation: Evaluation) -> dict[str, int]:
    """project slug -> the version of its task set the evaluation replayed, by slug; empty for an
    evaluation made before versions were recorded."""
    return {v.project.slug: v.number for v in sorted(evaluation.task_set_versions.all(), key=lambda v: v.project.slug)}


def task_sets_text(task_sets: dict[str, int]) -> str:
    """How a page names them: "sift v3, quill v1"; "not recorded" before versions were."""
    return ", ".join(f"{slug} v{n}" for slug, n in task_sets.items()) or "not recorded"


def task_sets_differ(evaluations) -> list[str]:
    """The task sets of listed evaluations when they are not all the same: their results compare
    across a change of tasks, and the page says so."""
    seen = sorted({task_sets_text(evaluation_task_sets(e)) for e in evaluations})
    return seen if len(seen) > 1 else []


def evaluation_for_pk(*, pk: int) -> Evaluation:
    return Evaluation.objects.select_related("corpus").get(pk=pk)


def fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f}" if metric == "tokens" else f"{value:.3f}"


@dataclass(frozen=True)
class Cell:
    condition: str
    trace: int | None
    values: tuple[tuple[str, str], ...]  # (metric label, formatted value) for the cell's metrics
    ecodes: tuple[tuple[str, str], ...]  # (unit id, code)


@dataclass(frozen=True)
class TaskRow:
    task: str
    project: str
    family: str
    work_type: str
    cells: tuple[Cell, ...]
    misassigned: Cell | None


@dataclass(frozen=True)
class EvaluationReport:
    conditions: tuple[str, ...]
    metrics: tuple[str, ...]
    metric_labels: tuple[str, ...]
    ladder: tuple[tuple[str, str, tuple[str, ...]], ...]  # (condition, label, formatted means)
    charts: tuple[dict, ...]  # one per metric: {metric, title, x, y, oracle}
    pairs: tuple[tuple[str, tuple[str, ...]], ...]
    hazard: tuple[dict, ...]
    ecodes: tuple[tuple[str, tuple[int, ...]], ...]
    ecode_names: tuple[str, ...]
    tasks: tuple[TaskRow, ...]
    doc: dict
    builders: tuple[dict, ...] = ()  # the frame-builder table, one row per builder
    builder_hazard: tuple[dict, ...] = ()  # tasks a builder misread: what it cost, both ways
    hazard_abstention: tuple[dict, ...] = ()  # misassigned frames as each builder establishes them


CELL_METRICS = ("must_include_recall", "precision", "tokens")


def _cell(condition: str, row: dict) -> Cell:
    return Cell(
        condition=condition,
        trace=row.get("trace"),
        values=tuple((METRIC_LABELS[m], fmt(m, row[m])) for m in CELL_METRICS),
        ecodes=tuple(sorted(row.get("ecodes", {}).items(), key=lambda kv: (kv[1], kv[0]))),
    )


def evaluation_report(*, evaluation: Evaluation) -> EvaluationReport:
    doc = evaluation.result
    names = tuple(doc["condition_order"])
    metrics = tuple(doc["metrics"])
    conditions = doc["conditions"]
    ladder_names = tuple(c for c in names if c != ORACLE)
    charts = tuple(
        {
            "metric": m,
            "title": METRIC_LABELS.get(m, m),
            "x": list(ladder_names),
            "y": [conditions[c]["mean"][m] for c in ladder_names],
            "oracle": conditions[ORACLE]["mean"][m] if ORACLE in conditions else None,
        }
        for m in metrics
    )
    tasks = []
    for task_id, info in doc["task_info"].items():
        wrong = doc.get("misassigned", {}).get(task_id)
        tasks.append(
            TaskRow(
                task=task_id,
                project=info["project"],
                family=info["family"],
                work_type=info.get("work_type") or "",
                cells=tuple(_cell(c, conditions[c]["tasks"][task_id]) for c in names),
                misassigned=_cell(f"C6 as {wrong['work_type']}", wrong) if wrong else None,
            )
        )
    return EvaluationReport(
        conditions=names,
        metrics=metrics,
        metric_labels=tuple(METRIC_LABELS.get(m, m) for m in metrics),
        ladder=tuple(
            (c, conditions[c]["label"], tuple(fmt(m, conditions[c]["mean"][m]) for m in metrics)) for c in names
        ),
        charts=charts,
        pairs=tuple((pair, tuple(fmt("overlap", row.get(c)) for c in names)) for pair, row in doc["pairs"].items()),
        hazard=tuple(
            {
                "task": task,
                "work_type": h["work_type"],
                "declared": fmt("", h["declared"]),
                "misassigned": fmt("", h["misassigned"]),
                "baseline": fmt("", h[BASELINE]),
                "worse": h[f"worse_than_{BASELINE}"],
            }
            for task, h in doc["hazard"].items()
        ),
        ecodes=tuple((c, tuple(doc["ecode_counts"][c].get(code, 0) for code in ECODES)) for c in names),
        ecode_names=ECODES,
        tasks=tuple(tasks),
        doc=doc,
        builders=_builder_rows(doc),
        builder_hazard=tuple(
            {"builder": name, "task": task, **{k: (fmt("", v) if isinstance(v, float) else v) for k, v in h.items()}}
            for name, rows in (doc.get("builder_hazard") or {}).items()
            for task, h in rows.items()
        ),
        hazard_abstention=tuple(
            {"builder": name, "task": task, **{k: (fmt("", v) if isinstance(v, float) else v) for k, v in h.items()}}
            for name, rows in (doc.get("hazard_abstention") or {}).items()
            for task, h in rows.items()
        ),
    )


def _builder_rows(doc: dict) -> tuple[dict, ...]:
    """Per builder: accuracy, establishment counts, mean recall both ways, and per task the built
    work type, its establishment and recall both ways beside C0, with the traces."""
    rows = []
    for name, table in (doc.get("builders") or {}).items():
        details = doc["builder_details"][name]
        guarded, plain = table["abstention"], table["no_abstention"]
        rows.append(
            {
                "name": name,
                "accuracy": fmt("", table["accuracy"]),
                # template lookups cannot read hyphenated keys
                "counts": {k.replace("-", "_"): v for k, v in details["establishment_counts"].items()},
                "condition": details["condition"],
                "baseline_mean": fmt("", doc["conditions"]["C0"]["mean"]["must_include_recall"]),
                "abstention": fmt("", guarded["mean"]["must_include_recall"]),
                "no_abstention": fmt("", plain["mean"]["must_include_recall"]),
                "tasks": tuple(
                    {
                        "task": task,
                        "declared": details["tasks"][task]["declared_work_type"] or "",
                        "work_type": cell["work_type"] or "",
                        "establishment": cell["establishment"],
                        # what abstention ran the frame as (older evaluations did not record it)
                        "ran_as": details["tasks"][task].get("effective_condition") or "",
                        "abstention": fmt("", cell["must_include_recall"]),
                        "no_abstention": fmt("", plain["tasks"][task]["must_include_recall"]),
                        "baseline": fmt("", details["tasks"][task]["C0"]),
                        "below": details["tasks"][task]["C0"] - cell["must_include_recall"] > 0.05 + 1e-12,
                        "traces": details["tasks"][task]["traces"],
                    }
                    for task, cell in guarded["tasks"].items()
                ),
            }
        )
    return tuple(rows)
