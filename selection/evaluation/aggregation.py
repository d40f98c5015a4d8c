"""The ladder's aggregation: pure functions over scored runs (plain mappings in, plain mappings out,
no ORM), so the numbers a reader sees can be checked by hand."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from itertools import combinations

from selection.engine.attribution import LOSS_STAGES, FailureCode
from selection.engine.metrics import METRICS, overlap

ORACLE = "CO"
BASELINE = "C0"  # the hazard table's query-only reference
HAZARD_CONDITION = "C6"  # the misassigned run: the full builder under the wrong work type
HAZARD_METRIC = "must_include_recall"
BUILDER_CONDITION = "C6"  # a built frame runs under the full builder, as a declared one does
DECLARED, MISASSIGNED = "declared", "misassigned"
ECODES: tuple[str, ...] = tuple(code.value for code in FailureCode)


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
