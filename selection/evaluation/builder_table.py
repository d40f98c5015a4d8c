"""The frame-builder table and the builder hazard table: pure aggregation over scored runs (plain
mappings in, plain mappings out), so every number a reader sees can be checked by hand."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

from selection.engine.types import ESTABLISHMENTS

ABSTENTION, NO_ABSTENTION = "abstention", "no_abstention"
SIDES = (ABSTENTION, NO_ABSTENTION)
RECALL = "must_include_recall"


def parse_builders(names: str | Sequence[str] | None, known: Sequence[str]) -> tuple[str, ...]:
    """Builder names in the order given, each once; an unknown name is an error naming the known."""
    if names is None:
        return ()
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",")]
    chosen: list[str] = []
    for name in names:
        if not name:
            continue
        if name not in known:
            raise ValueError(f"unknown frame builder {name!r}; known: {', '.join(known)}")
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)


def accuracy(chosen: Mapping[str, str | None], declared: Mapping[str, str | None]) -> float:
    """Share of tasks with a declared work type whose built work type equals it (0.0 when none)."""
    judged = [t for t, wt in declared.items() if wt]
    if not judged:
        return 0.0
    return sum(1 for t in judged if chosen.get(t) == declared[t]) / len(judged)


def builder_side(
    runs: Mapping[str, Mapping[str, object]], metrics: Sequence[str]
) -> dict[str, object]:
    """{"mean": {metric: value}, "tasks": {task: {work_type, establishment, must_include_recall}}}
    from task -> {"work_type", "establishment", "metrics": {metric: value}}."""
    n = len(runs)
    mean = {
        m: (math.fsum(float(r["metrics"][m]) for r in runs.values()) / n if n else 0.0)  # type: ignore[index]
        for m in metrics
    }
    tasks = {
        t: {
            "work_type": r["work_type"],
            "establishment": r["establishment"],
            RECALL: float(r["metrics"][RECALL]),  # type: ignore[index]
        }
        for t, r in sorted(runs.items())
    }
    return {"mean": mean, "tasks": tasks}


def establishment_counts(side: Mapping[str, Mapping[str, object]]) -> dict[str, int]:
    counts = Counter(str(row["establishment"]) for row in side.values())
    return {name: counts.get(name, 0) for name in ESTABLISHMENTS}


def builder_hazard(
    sides: Mapping[str, Mapping[str, Mapping[str, object]]],
    declared_type: Mapping[str, str | None],
    declared_recall: Mapping[str, float],
    baseline: Mapping[str, float],
) -> dict[str, dict[str, object]]:
    """task -> what the builder's misreading cost, for each task whose built work type differs from
    the declared one: declared-frame recall, the builder's recall without and with abstention, C0.
    `sides[side][task]` is a builder_side() task row."""
    table: dict[str, dict[str, object]] = {}
    plain, guarded = sides[NO_ABSTENTION], sides[ABSTENTION]
    for task in sorted(plain):
        wanted = declared_type.get(task)
        built = plain[task]["work_type"]
        if not wanted or built == wanted:
            continue
        table[task] = {
            "declared_work_type": wanted,
            "work_type": built,
            "establishment": plain[task]["establishment"],
            "declared": declared_recall[task],
            NO_ABSTENTION: plain[task][RECALL],
            ABSTENTION: guarded[task][RECALL],
            "C0": baseline[task],
        }
    return table


def c0_shortfalls(
    side: Mapping[str, Mapping[str, object]], baseline: Mapping[str, float], tolerance: float = 0.05
) -> dict[str, float]:
    """task -> how far its recall falls below C0's, for tasks more than `tolerance` below."""
    return {
        t: round(baseline[t] - float(row[RECALL]), 6)  # type: ignore[arg-type]
        for t, row in sorted(side.items())
        if baseline[t] - float(row[RECALL]) > tolerance + 1e-12  # type: ignore[arg-type]
    }
