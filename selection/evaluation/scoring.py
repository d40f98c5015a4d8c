"""Scoring against hidden ledgers: the only module that reads LedgerEntry rows.

Selection code (the engine, and selection.serving.selections for C0..C6) never calls this module's
ledger reads; only evaluation, backtests, attribution and the oracle do.
"""

from __future__ import annotations

from dataclasses import dataclass

from selection.engine.attribution import Attribution, attribute, loss_counts, must_loss_stages
from selection.engine.metrics import score_bundle
from selection.engine.outputs import SelectionResult
from selection.engine.types import ProjectFrame
from selection.memory import store
from selection.models import LedgerEntry, Task


def ledger_for_task(task: Task) -> dict[str, str]:
    """unit id -> label; units not named count as DISTRACTOR."""
    return dict(
        LedgerEntry.objects.filter(task=task)
        .order_by("unit__uid")
        .values_list("unit__uid", "label")
    )


@dataclass(frozen=True)
class TaskScore:
    metrics: dict[str, float]
    attribution: Attribution
    admitted: tuple[str, ...]
    loss_stages: dict[str, str]  # MUST unit id -> where it was lost (or "recalled")

    def ecodes(self) -> dict[str, str]:
        """Missed MUST units, admitted harmful or stale ones (E4), and E6."""
        return {e.unit_id: e.code for e in self.attribution.units if e.label != "SHOULD"}

    def should_ecodes(self) -> dict[str, str]:
        """Missed SHOULD units, attributed like MUST ones."""
        return {e.unit_id: e.code for e in self.attribution.units if e.label == "SHOULD"}

    def losses(self) -> dict[str, int]:
        return loss_counts(self.loss_stages)


def score_result(
    task: Task,
    result: SelectionResult,
    project_frame: ProjectFrame,
    ledger: dict[str, str] | None = None,
) -> TaskScore:
    ledger = ledger if ledger is not None else ledger_for_task(task)
    index = store.corpus_index(task.corpus_id)
    admitted = result.bundle.unit_ids()
    # the units the metrics and the attribution read: the bundle's and the ledger's, not the corpus
    units = {}
    for uid in sorted({*admitted, *ledger}):
        position = index.position.get(uid)
        if position is not None:
            units[uid] = index.units[position]
    project_of = {uid: u.project for uid, u in units.items()}
    echo_of = {uid: u.echo_of for uid, u in units.items()}
    metrics = score_bundle(
        result.bundle, ledger, project_of=project_of, echo_of=echo_of, scope=project_frame.scope_set
    )
    attribution = attribute(result.trace, ledger, units.keys())
    stages = must_loss_stages(
        result.trace, ledger, units.keys(), {i.item_id: i.tokens for i in result.bundle.items}
    )
    return TaskScore(
        metrics=metrics,
        attribution=attribution,
        admitted=tuple(admitted),
        loss_stages=stages,
    )


def ledgers_for_tasks(task_ids: list[int]) -> dict[int, dict[str, str]]:
    """Task pk -> its ledger (unit id -> label), in one query; tasks with no entry map to {}."""
    ledgers: dict[int, dict[str, str]] = {task_id: {} for task_id in task_ids}
    rows = (
        LedgerEntry.objects.filter(task_id__in=task_ids)
        .order_by("task_id", "unit__uid")
        .values_list("task_id", "unit__uid", "label")
    )
    for task_id, unit_uid, label in rows.iterator(chunk_size=5000):
        ledgers[task_id][unit_uid] = label
    return ledgers


def ledgers_of_corpus(corpus_id: int) -> dict[int, dict[str, str]]:
    """Task pk -> its ledger, units in corpus file order, for the exporter; tasks with none are absent."""
    ledgers: dict[int, dict[str, str]] = {}
    rows = (
        LedgerEntry.objects.filter(task__corpus_id=corpus_id)
        .order_by("task_id", "unit__position", "unit_id")
        .values_list("task_id", "unit__uid", "label")
    )
    for task_id, unit_uid, label in rows:
        ledgers.setdefault(task_id, {})[unit_uid] = label
    return ledgers
