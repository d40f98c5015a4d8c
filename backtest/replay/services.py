"""One replay of a backtest: a task under one side's frame, scored and written once.

Replays are idempotent: (backtest, task, side) is unique, and a chunk's pairs are written in one
transaction under the backtest's advisory lock, only those still missing once it is held, so a
chunk delivered again (or racing a copy of itself) writes nothing twice.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

from django.db import connection, transaction
from django.db.models import Exists, OuterRef

from rules import frame_patch as frame_rules
from selection import telemetry
from selection.corpus.frames import merge_patch
from selection.engine.index import CorpusIndex
from selection.engine.metrics import score_bundle
from selection.engine.outputs import ContextBundle, SelectionResult
from selection.engine.types import ProjectFrame, WorkFrame
from selection.evaluation.scoring import ledgers_for_tasks
from selection.memory import store
from selection.models import Task, TraceTombstone
from selection.serving.framing import FramingError, task_work_frame
from selection.serving.query_vectors import embed_queries
from selection.serving.selections import SelectionInputs, selection_run
from selection.traces.recording import TraceEntry, traces_write

from ..errors import BacktestError
from ..models import (
    AblationReplay,
    Backtest,
    BacktestStatus,
    ReplaySide,
    TaskReplay,
)
from . import reuse
from .dispatch import ABLATION_SIDE

logger = logging.getLogger(__name__)

CONDITION = "C6"
TRACE_SOURCE = "backtest"
REPLAY_LOCK_CLASS = 7_104_317


def variant_frame(proposal, included) -> dict:
    """The frame of some of the proposal's parts applied over the version it was written against."""
    return merge_patch(
        proposal.base_version.snapshot, frame_rules.patch_only(proposal.patch, included)
    )


# --- one replay ------------------------------------------------------------------------------

# Worker-process caches of immutable rows (FrameVersion frames are cached in selection.memory.store): a
# task's work frame and ledger, a corpus index's unit maps. Rows they hold are never updated (triggers, import-only).


@dataclass(frozen=True)
class _TaskContext:
    task: Task
    work_frame: WorkFrame
    ledger: dict[str, str]


@lru_cache(maxsize=8192)
def _task_context(task_id: int) -> _TaskContext:
    task = Task.objects.select_related("project", "corpus").get(pk=task_id)
    return _TaskContext(task, store.work_frame_for_task(task), ledgers_for_tasks([task_id])[task_id])


_unit_maps: OrderedDict[int, tuple[CorpusIndex, dict, dict]] = OrderedDict()
_unit_maps_lock = threading.Lock()


def unit_maps(corpus_id: int, index: CorpusIndex) -> tuple[dict, dict]:
    """project_of and echo_of of a corpus index, built once per index (not per replay)."""
    with _unit_maps_lock:
        cached = _unit_maps.get(corpus_id)
        if cached is not None and cached[0] is index:
            return cached[1], cached[2]
    project_of = {u.id: u.project for u in index.units}
    echo_of = {u.id: u.echo_of for u in index.units}
    with _unit_maps_lock:
        _unit_maps[corpus_id] = (index, project_of, echo_of)
        while len(_unit_maps) > 4:
            _unit_maps.popitem(last=False)
    return project_of, echo_of


def _select(
    context: _TaskContext, frame: ProjectFrame, condition: str, index: CorpusIndex
) -> tuple[SelectionResult, CorpusIndex]:
    task = context.task
    work_frame = context.work_frame
    if frame.establishment.builder != "declared":
        # the frame says how work frames are established: a side whose frame names a builder is
        # replayed as an agent that declares nothing would meet it, so a proposed builder,
        # threshold, description or cue is measured like any other frame change
        try:
            work_frame = task_work_frame(
                task=task, builder=frame.establishment.builder, project_frame=frame
            )
        except FramingError as error:
            raise BacktestError(f"{task.uid}: {error}") from error
    inputs = SelectionInputs(
        project_frame=frame,
        work_frame=work_frame,
        query=task.query,
        budget_tokens=task.budget_tokens,
        condition=condition,
        standpoint=task.standpoint,
        routing=store.routing_inputs_for_task(task),
    )
    return selection_run(inputs, index), index


def backtest_warm(*, backtest_id: int) -> int:
    """Fill this process's replay caches ahead of a backtest's replays, as a worker that has run a
    while holds them: the corpus index, both frame versions, each task's work frame, ledger and
    query embeddings, the unit maps. Writes nothing; returns the number of tasks warmed.
    """
    backtest = Backtest.objects.only("task_ids", "baseline_version_id", "candidate_version_id", "memory_now").get(
        pk=backtest_id
    )
    store.frame_of_version(backtest.baseline_version_id)
    store.frame_of_version(backtest.candidate_version_id)
    for task_id in backtest.task_ids:
        context = _task_context(task_id)
        index = store.corpus_index(context.task.corpus_id, as_of=_as_of(backtest, context))
        if index.dense is not None:  # the texts selection_request embeds
            objective = context.work_frame.objective
            embed_queries([context.task.query, objective] if objective else [context.task.query])
        unit_maps(context.task.corpus_id, index)
    return len(backtest.task_ids)


@lru_cache(maxsize=64)
def _variant(backtest_id: int, variant: int) -> ProjectFrame:
    """The engine frame of one ablation variant of a backtest (rows it reads are immutable)."""
    backtest = Backtest.objects.select_related(
        "proposal", "proposal__project", "proposal__base_version", "candidate_version"
    ).get(pk=backtest_id)
    variants = (backtest.ablation or {}).get("variants") or []
    if not 0 <= variant < len(variants):
        raise BacktestError(f"backtest #{backtest_id} has no ablation variant {variant}")
    proposal = backtest.proposal
    return store.frame_from_snapshot(
        project=proposal.project,
        number=backtest.candidate_version.number,
        snapshot=variant_frame(proposal, variants[variant]),
    )


def _variant_index(side: str) -> int | None:
    if not side.startswith(ABLATION_SIDE):
        return None
    number = side[len(ABLATION_SIDE):]
    return int(number) if number.isdigit() else None


def _check_side(side: str) -> None:
    if side not in ReplaySide.values and _variant_index(side) is None:
        raise BacktestError(
            f'unknown side "{side}": one of {", ".join(ReplaySide.values)} or {ABLATION_SIDE}<variant>'
        )


Replayed = TaskReplay | AblationReplay


def _done(backtest_id: int, pairs: list[tuple[int, str]]) -> dict[tuple[int, str], Replayed]:
    """The rows already stored for these (task, side) pairs: one query per kind of row."""
    task_ids = sorted({t for t, _ in pairs})
    found: dict[tuple[int, str], Replayed] = {}
    if any(s in ReplaySide.values for _, s in pairs):
        for row in TaskReplay.objects.filter(backtest_id=backtest_id, task_id__in=task_ids):
            found[(row.task_id, row.side)] = row
    if any(_variant_index(s) is not None for _, s in pairs):
        for row in AblationReplay.objects.filter(backtest_id=backtest_id, task_id__in=task_ids):
            found[(row.task_id, f"{ABLATION_SIDE}{row.variant}")] = row
    return {pair: found[pair] for pair in pairs if pair in found}


@dataclass
class _Outcome:
    """One (task, side) computed and not yet written: a selection to trace, a baseline replay
    reused (its trace), or an ablation variant's metrics."""

    task_id: int
    side: str
    metrics: dict
    context: _TaskContext
    result: SelectionResult | None = None
    frame_version: int | None = None
    reused_trace_id: int | None = None
    reuse_key: str = ""
    memory_sequence: int | None = None  # the memory sequence of the index it was selected over


def _scored(backtest: Backtest, context: _TaskContext, bundle, index: CorpusIndex) -> dict:
    project_of, echo_of = unit_maps(context.task.corpus_id, index)
    # leakage is measured against the BASELINE frame's scope on both sides: a candidate that
    # widens its own scope must not make its leakage read zero by moving the yardstick
    _number, baseline_frame = store.frame_of_version(backtest.baseline_version_id)
    return score_bundle(bundle, context.ledger, project_of=project_of, echo_of=echo_of, scope=baseline_frame.scope_set)


def _as_of(backtest: Backtest, context: _TaskContext) -> int | None:
    """The memory sequence a task is replayed as of: the one it was made at (labelled from a
    trace), unless the backtest replays as of now (`memory_now`) or the task carries none."""
    return None if backtest.memory_now else context.task.memory_sequence


def _index_of(backtest: Backtest, context: _TaskContext, indexes: dict) -> CorpusIndex:
    """The task's corpus index as of its sequence, looked up once per chunk (`indexes`, by corpus
    and sequence), not once per replay."""
    key = (context.task.corpus_id, _as_of(backtest, context))
    if key not in indexes:
        indexes[key] = store.corpus_index(key[0], as_of=key[1])
    return indexes[key]


def _replay_compute(backtest: Backtest, task_id: int, side: str, indexes: dict[int, CorpusIndex]) -> _Outcome:
    """Run one (task, side) through the engine and score it; writes nothing."""
    context = _task_context(task_id)
    variant = _variant_index(side)
    if variant is not None:
        number, frame = None, _variant(backtest.pk, variant)
    else:
        version_id = backtest.baseline_version_id if side == ReplaySide.BASELINE else backtest.candidate_version_id
        number, frame = store.frame_of_version(version_id)
    result, index = _select(context, frame, backtest.condition, _index_of(backtest, context, indexes))
    metrics = _scored(backtest, context, result.bundle, index)
    return _Outcome(
        task_id, side, metrics, context, result=result, frame_version=number,
        memory_sequence=getattr(index, "memory_sequence", None),
    )


def _reused_baselines(
    backtest: Backtest, task_ids: list[int], indexes: dict[int, CorpusIndex]
) -> dict[int, _Outcome]:
    """Baseline replays another backtest already made with the same inputs (reuse.baseline_key):
    task id -> an outcome naming that replay's trace, its metrics scored again here."""
    if not task_ids:
        return {}
    contexts = {t: _task_context(t) for t in task_ids}
    keys = {
        reuse.baseline_key(backtest, task_id, _fingerprint(backtest, context, indexes)): task_id
        for task_id, context in contexts.items()
    }
    stored = (
        TaskReplay.objects.filter(side=ReplaySide.BASELINE, reuse_key__in=list(keys))
        .exclude(backtest_id=backtest.pk)
        .exclude(Exists(TraceTombstone.objects.filter(trace_id=OuterRef("trace_id"))))
        .order_by("pk")
        .values_list("reuse_key", "trace_id", "trace__bundle")
    )
    outcomes: dict[int, _Outcome] = {}
    for key, trace_id, bundle in stored:
        task_id = keys[key]
        if task_id in outcomes:
            continue  # the first replay of these inputs is the one every later one names
        context = contexts[task_id]
        metrics = _scored(backtest, context, ContextBundle.from_dict(bundle), _index_of(backtest, context, indexes))
        outcomes[task_id] = _Outcome(
            task_id, ReplaySide.BASELINE, metrics, context, reused_trace_id=trace_id, reuse_key=key
        )
    return outcomes


def _fingerprint(backtest: Backtest, context: _TaskContext, indexes: dict) -> str:
    """What the task's index depends on: its corpus's base key, revision and memory sequence."""
    return store.corpus_index_fingerprint(context.task.corpus_id, _index_of(backtest, context, indexes))


def _baseline_keys(backtest: Backtest, outcomes: list[_Outcome], indexes: dict[int, CorpusIndex]) -> None:
    """The reuse key of each baseline replay made here, stored with its row for later backtests."""
    fresh = [o for o in outcomes if o.side == ReplaySide.BASELINE and not o.reuse_key]
    if not fresh:
        return
    for outcome in fresh:
        fingerprint = _fingerprint(backtest, outcome.context, indexes)
        outcome.reuse_key = reuse.baseline_key(backtest, outcome.task_id, fingerprint)


def _replays_write(backtest_id: int, outcomes: list[_Outcome]) -> dict[tuple[int, str], Replayed]:
    """Every outcome's trace and row in one transaction: traces by one bulk insert and one COPY
    (selection.serving.selections.traces_write), then the TaskReplay and AblationReplay rows. The backtest's
    advisory lock makes concurrent writers of the same backtest (a redelivered chunk) take turns,
    and each writes only the pairs still missing once it holds the lock."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            # a replay is derived data, made again by a re-run: its commit does not wait for the WAL
            # flush (~8 ms here, paid per chunk). A crash loses at most the last commits, a suffix
            # of the WAL, so the trace chain stays whole and the backtest lacks replays (it fails
            # and is re-run); a live selection's trace (selection.serving.selections) keeps the durable commit
            cursor.execute("SET LOCAL synchronous_commit TO off")
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [REPLAY_LOCK_CLASS, backtest_id])
        written = _done(backtest_id, [(o.task_id, o.side) for o in outcomes])
        todo = [o for o in outcomes if (o.task_id, o.side) not in written]
        traced = [o for o in todo if o.result is not None and _variant_index(o.side) is None]
        traces = traces_write(
            [
                TraceEntry(
                    o.result, o.context.task.project, o.frame_version, o.context.task, TRACE_SOURCE,
                    o.memory_sequence,
                )
                for o in traced
            ]
        )
        trace_of = {(o.task_id, o.side): t.pk for o, t in zip(traced, traces, strict=True)}
        replays = TaskReplay.objects.bulk_create(
            [
                TaskReplay(
                    backtest_id=backtest_id,
                    task_id=o.task_id,
                    side=o.side,
                    trace_id=o.reused_trace_id or trace_of[(o.task_id, o.side)],
                    metrics=o.metrics,
                    reuse_key=o.reuse_key,
                )
                for o in todo
                if _variant_index(o.side) is None
            ]
        )
        variants = AblationReplay.objects.bulk_create(
            [
                AblationReplay(
                    backtest_id=backtest_id,
                    task_id=o.task_id,
                    variant=_variant_index(o.side),
                    metrics=o.metrics,
                    admitted=list(o.result.bundle.unit_ids()),
                )
                for o in todo
                if _variant_index(o.side) is not None
            ]
        )
    for row in replays:
        written[(row.task_id, row.side)] = row
    for row in variants:
        written[(row.task_id, f"{ABLATION_SIDE}{row.variant}")] = row
    return written


@telemetry.traced_replays
def replay_many(*, backtest_id: int, pairs: list[tuple[int, str]], reuse_baseline: bool = True) -> list[Replayed]:
    """Replay many (task, side) pairs of one backtest and store their traces and metrics in one
    transaction, each pair once: pairs already stored are returned as they are, and a chunk
    delivered again (a retry, a redelivery after a lost worker) writes nothing twice.

    A side is "baseline", "candidate" (a TaskReplay with its trace) or "ablation-<i>" (an
    AblationReplay of variant i: metrics only). `reuse_baseline`: a baseline pair that another
    backtest already replayed with the same inputs (baseline version, task, condition, corpus
    index, selection code and embedding model: reuse.baseline_key) names that replay's trace and
    is scored again, instead of being selected and traced again. Returns the rows in pair order.
    """
    pairs = [(int(t), str(s)) for t, s in pairs]
    for _task_id, side in pairs:
        _check_side(side)
    found = _done(backtest_id, pairs)
    missing = list(dict.fromkeys(p for p in pairs if p not in found))
    if missing:
        backtest = Backtest.objects.only(
            "id", "status", "task_ids", "condition", "baseline_version_id", "candidate_version_id", "memory_now"
        ).get(pk=backtest_id)
        members = set(backtest.task_ids)
        for task_id, _side in missing:
            if task_id not in members:
                raise BacktestError(f"task {task_id} is not in backtest #{backtest_id}")
        if backtest.status == BacktestStatus.QUEUED:
            Backtest.objects.filter(pk=backtest_id, status=BacktestStatus.QUEUED).update(status=BacktestStatus.RUNNING)
        indexes: dict[tuple[int, int | None], CorpusIndex] = {}
        reused = (
            _reused_baselines(backtest, [t for t, s in missing if s == ReplaySide.BASELINE], indexes)
            if reuse_baseline
            else {}
        )
        outcomes = [
            reused[t] if s == ReplaySide.BASELINE and t in reused else _replay_compute(backtest, t, s, indexes)
            for t, s in missing
        ]
        _baseline_keys(backtest, outcomes, indexes)
        found.update(_replays_write(backtest_id, outcomes))
    return [found[pair] for pair in pairs]


@telemetry.traced_replay
def replay_one(*, backtest_id: int, task_id: int, side: str) -> Replayed:
    """Replay one task under one side's frame version and store its trace and metrics, once; an
    ablation side ("ablation-<i>") stores the variant's metrics. replay_many of one pair."""
    return replay_many(backtest_id=backtest_id, pairs=[(task_id, side)])[0]
