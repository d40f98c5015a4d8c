"""The review card: every task a backtest made worse, by any quality metric and any amount.

A passing gate compares means, so one task can fall while the mean rises; the card lists each
such task with its trace diff, and approving asks the reviewer to acknowledge every one.
Token use is a cost, not a quality: a task that only spends more tokens is not listed.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from rules import gate_verdict as gate_rules

from ..models import Backtest, TaskReplay
from .standards import reference_replays

# the corpus format's quality metrics and which way is better (selection.engine.metrics.METRICS
# without tokens)
HIGHER_IS_BETTER = ("must_include_recall", "precision")
LOWER_IS_BETTER = ("leakage", "harmful_admission", "redundancy")


@dataclass(frozen=True)
class Worse:
    metric: str
    baseline: float
    candidate: float

    @property
    def delta(self) -> float:
        return self.candidate - self.baseline


@dataclass(frozen=True)
class Regression:
    task: str  # task uid, also the acknowledgement's value
    worse: tuple[Worse, ...]
    diff_url: str | None

    @property
    def summary(self) -> str:
        return "; ".join(f"{w.metric} {gate_rules.fmt(w.baseline)} → {gate_rules.fmt(w.candidate)}" for w in self.worse)


def _worse(baseline: dict, candidate: dict) -> tuple[Worse, ...]:
    found = []
    for metric in HIGHER_IS_BETTER + LOWER_IS_BETTER:
        if metric not in baseline or metric not in candidate:
            continue
        b, c = float(baseline[metric]), float(candidate[metric])
        fell = c < b - gate_rules.EPSILON if metric in HIGHER_IS_BETTER else c > b + gate_rules.EPSILON
        if fell:
            found.append(Worse(metric, b, c))
    return tuple(found)


def regressed_tasks(*, backtest: Backtest) -> list[Regression]:
    """Tasks worse under the candidate than under the baseline, in the backtest's task order (one
    query over its replays)."""
    sides: dict[int, dict[str, tuple[str, int, dict]]] = {}
    for task_id, uid, side, trace_id, metrics in TaskReplay.objects.filter(backtest=backtest).values_list(
        "task_id", "task__uid", "side", "trace_id", "metrics"
    ):
        sides.setdefault(task_id, {})[side] = (uid, trace_id, metrics or {})
    # a rollback judged against the restored version's recorded replays: worse than those
    for task_id, (trace_id, metrics) in (reference_replays(backtest) or {}).items():
        if "baseline" in sides.get(task_id, {}):
            sides[task_id]["baseline"] = (sides[task_id]["baseline"][0], trace_id, metrics or {})
    diff = reverse("trace-diff")
    found = []
    for task_id in backtest.task_ids:
        pair = sides.get(task_id, {})
        if "baseline" not in pair or "candidate" not in pair:
            continue
        (uid, base_trace, base), (_, cand_trace, cand) = pair["baseline"], pair["candidate"]
        worse = _worse(base, cand)
        if worse:
            found.append(Regression(uid, worse, f"{diff}?a={base_trace}&b={cand_trace}"))
    return found


def missing_acknowledgements(regressions: list[Regression], acknowledged) -> list[str]:
    """The regressed tasks an approval has not acknowledged, in order."""
    given = set(acknowledged or ())
    return [r.task for r in regressions if r.task not in given]
