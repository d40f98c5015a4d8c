"""Backtest writes: enqueue, replay (task, side) pairs in chunks, finish with a gate decision, or fail.

Each write and its audit row share one transaction.atomic; the Celery chord is sent on commit.
Replays are idempotent: (backtest, task, side) is unique, and a chunk's pairs are written in one
transaction under the backtest's advisory lock, only those still missing once it is held, so a
chunk delivered again (or racing a copy of itself) writes nothing twice.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import lru_cache

from celery import chord, group, signature
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, Max, OuterRef
from django.utils import timezone

from authority import access
from authority.audit import audit_record
from authority.selectors import current_frame_version
from governance import frames as frame_rules
from governance import selectors as governance_selectors
from governance.models import Proposal, ProposalState
from governance.services import GovernanceError, InputRefused, proposal_sync_state
from selection import telemetry
from selection.corpus.frames import merge_patch
from selection.engine.index import CorpusIndex
from selection.engine.metrics import leakage, score_bundle
from selection.engine.outputs import ContextBundle, SelectionResult
from selection.engine.pipeline import ENGINE_VERSION
from selection.engine.types import ProjectFrame, WorkFrame
from selection.evaluation.scoring import ledgers_for_tasks
from selection.memory import store
from selection.models import Project, Task, Trace, TraceTombstone
from selection.serving.framing import FramingError, task_work_frame
from selection.serving.query_vectors import embed_queries
from selection.serving.selections import SelectionError, SelectionInputs, selection_run
from selection.traces.recording import TraceEntry, trace_write, traces_write
from selection.traces.selectors import stored_inputs

from . import ablation as ablation_rules
from . import gates as gate_rules
from . import reuse, review_card, selectors
from .models import (
    AblationReplay,
    Approval,
    ApprovalVerdict,
    Backtest,
    BacktestDecision,
    BacktestStatus,
    ReplaySide,
    ReviewComment,
    ShadowReplay,
    TaskReplay,
)
from .taskset import project_tasks, task_set_version_record, tasks_digest

logger = logging.getLogger(__name__)

CONDITION = "C6"
TRACE_SOURCE = "backtest"
ABLATION_SIDE = "ablation-"  # the side of a variant's replay: "ablation-<index into the variants>"
# pg_advisory_xact_lock(class, backtest id): writers of one backtest's replays take turns
REPLAY_LOCK_CLASS = 7_104_317


class BacktestRefused(GovernanceError):
    """A backtest that cannot start (no promoted version, no task, already promoted)."""


class BacktestError(RuntimeError):
    """A backtest that cannot go on: an unknown task or side, missing replays at the end."""


class ReviewRefused(GovernanceError):
    """A review that cannot be recorded: the backtest is not finished, already reviewed, ..."""


class RegressionsUnacknowledged(ReviewRefused):
    """An approval that has not acknowledged every task the backtest made worse.

    A field error, not a conflict of state: the API answers 422 naming `acknowledged` (the
    GovernanceError handler reads `status` and `fields`), the page ticks the boxes still to tick.
    """

    status = 422

    def __init__(self, tasks: list[str]):
        self.tasks = list(tasks)
        self.fields = [
            (("body", "acknowledged"), f"not acknowledged: {', '.join(self.tasks)}"),
        ]
        super().__init__(
            f"acknowledge each task that got worse before approving: {', '.join(self.tasks)}"
        )


def _gates_of(snapshot: dict) -> dict:
    gates = dict(snapshot.get("gates") or {})
    gates.setdefault("primary", gate_rules.DEFAULT_PRIMARY)
    gates.setdefault("min_improvement", 0.0)
    gates.setdefault("limits", [])
    return gates


# --- enqueue ---------------------------------------------------------------------------------


def _variant_frame(proposal: Proposal, included) -> dict:
    """The frame of some of the proposal's parts applied over the version it was written against."""
    return merge_patch(
        proposal.base_version.snapshot, frame_rules.patch_only(proposal.patch, included)
    )


def ablation_plan(proposal: Proposal) -> dict:
    """What a backtest of `proposal` ablates: {"parts", "variants", "note"}, or {} for one part.

    Parts ≥ 2 and ≤ MAX_ABLATION_PARTS are ablated; more are backtested whole and the note says
    so, as it does when some variant is not a valid frame on its own.
    """
    parts = frame_rules.patch_parts(proposal.patch)
    if len(parts) < 2:
        return {}
    limit = frame_rules.MAX_ABLATION_PARTS
    if len(parts) > limit:
        note = f"{len(parts)} parts, more than the {limit} an ablation replays: backtested whole only"
        return {"parts": parts, "variants": [], "note": note}
    chosen = ablation_rules.plan(parts)
    declared = governance_selectors.declared_projects(project=proposal.project)
    for included in chosen.variants:
        issues = frame_rules.frame_issues(
            _variant_frame(proposal, included), project=proposal.project.slug, declared=declared
        )
        if issues:
            note = f"{' + '.join(included)} alone is not a valid frame ({issues[0]}): backtested whole only"
            return {"parts": parts, "variants": [], "note": note}
    return {"parts": parts, "variants": [list(v) for v in chosen.variants], "note": ""}


def replay_sides(backtest: Backtest) -> list[str]:
    """Every side a backtest replays each task under: baseline, candidate, then each variant."""
    variants = (backtest.ablation or {}).get("variants") or []
    return [*ReplaySide.values, *(f"{ABLATION_SIDE}{i}" for i in range(len(variants)))]


def replays_expected(backtest: Backtest) -> int:
    """Task replays on every side, and one per recorded selection of the shadow replay."""
    return len(backtest.task_ids) * len(replay_sides(backtest)) + len((backtest.shadow or {}).get("traces", []))


def replays_done(backtest: Backtest) -> int:
    return (
        TaskReplay.objects.filter(backtest=backtest).count()
        + AblationReplay.objects.filter(backtest=backtest).count()
        + ShadowReplay.objects.filter(backtest=backtest).count()
    )


def backtest_enqueue(*, proposal: Proposal, requested_by=None, shadow: int | None = None) -> Backtest:
    """Start a backtest of `proposal` against the current promoted version; the chord runs on commit.

    `requested_by` None is the system (the CLI, a re-run); a user needs the lead role. `shadow`:
    how many of the project's last live selections it also replays (None: FG_BACKTEST_SHADOW).
    """
    project = proposal.project
    if requested_by is not None:
        access.access_propose(requested_by, project)
    with transaction.atomic():
        # the baseline cannot move while the backtest row is written
        Project.objects.select_for_update().get(pk=project.pk)
        proposal = Proposal.objects.select_related("frame_version", "project").get(pk=proposal.pk)
        if proposal.state == ProposalState.PROMOTED:
            raise BacktestRefused(f"proposal #{proposal.pk} is already promoted")
        if proposal.state == ProposalState.CLOSED:
            raise BacktestRefused(f"proposal #{proposal.pk} is closed")
        baseline = current_frame_version(project=project)
        if baseline is None:
            raise BacktestRefused(f"{project.slug} has no promoted frame version to compare with")
        tasks = project_tasks(project)
        if not tasks:
            raise BacktestRefused(f"{project.slug} has no task to replay")
        candidate = proposal.frame_version
        ablation = ablation_plan(proposal)
        shadows = _shadow_plan(project, shadow)
        digest = tasks_digest(tasks)
        # the version it names (recorded now if the set is new; the project's row lock is held)
        task_set = task_set_version_record(project=project, digest=digest, tasks=len(tasks))
        backtest = Backtest.objects.create(
            proposal=proposal,
            baseline_version=baseline,
            candidate_version=candidate,
            condition=CONDITION,
            task_ids=[t["id"] for t in tasks],
            task_set_digest=digest,
            task_set_version=task_set,
            engine_version=ENGINE_VERSION,
            gates=_gates_of(baseline.snapshot),
            requested_by=requested_by,
            status=BacktestStatus.QUEUED,
            ablation=ablation,
            shadow=shadows,
        )
        audit_record(
            actor=requested_by,
            project=project,
            action="backtest.started",
            obj=backtest,
            summary=(
                f"backtest #{backtest.pk} of proposal #{proposal.pk}: v{candidate.number} against "
                f"v{baseline.number} over {len(tasks)} tasks (task set v{task_set.number})"
            ),
            payload={
                "proposal": proposal.pk,
                "baseline_version": baseline.number,
                "candidate_version": candidate.number,
                "condition": CONDITION,
                "tasks": len(tasks),
                "task_set_digest": backtest.task_set_digest,
                "task_set_version": task_set.number,
                "engine_version": ENGINE_VERSION,
                "gates": backtest.gates,
                "ablation": ablation,
                "shadow": shadows,
            },
        )
        proposal_sync_state(proposal=proposal)
        backtest_id = backtest.pk
        transaction.on_commit(lambda: _launch(backtest_id))
    return backtest


REPLAY_TASK = "backtest.replay_task"
REPLAY_CHUNK_TASK = "backtest.replay_chunk"
SHADOW_TASK = "backtest.shadow_task"
FINISH_TASK = "backtest.finish_backtest"
FAIL_TASK = "backtest.fail_backtest"


def replay_chunks(backtest: Backtest) -> list[list[tuple[int, str]]]:
    """Every (task, side) of a backtest (each task's sides together, tasks in order), cut into
    chunks of FG_BACKTEST_CHUNK pairs, fewer per chunk when that leaves under
    FG_BACKTEST_MIN_CHUNKS chunks, so that a small backtest still spreads over several workers."""
    pairs = [(task_id, side) for task_id in backtest.task_ids for side in replay_sides(backtest)]
    if not pairs:
        return []
    size = max(1, min(settings.FG_BACKTEST_CHUNK, -(-len(pairs) // settings.FG_BACKTEST_MIN_CHUNKS)))
    return [pairs[i : i + size] for i in range(0, len(pairs), size)]


def launch_chord(backtest_id: int):
    """Send the replays in chunks (replay_chunks: each chunk one Celery task that replays its pairs
    and writes them in one transaction, replay_many), one task per recorded selection of the shadow
    replay, then the judge.

    Tasks are named, not imported: backtest.tasks calls this module, never the reverse.
    """
    backtest = Backtest.objects.only("task_ids", "ablation", "shadow").get(pk=backtest_id)
    replays = group(
        [
            *(
                signature(REPLAY_CHUNK_TASK, args=(backtest_id, [list(p) for p in chunk]), immutable=True)
                for chunk in replay_chunks(backtest)
            ),
            *(
                signature(SHADOW_TASK, args=(backtest_id, trace_id), immutable=True)
                for trace_id in (backtest.shadow or {}).get("traces", [])
            ),
        ]
    )
    callback = signature(FINISH_TASK, args=(backtest_id,)).on_error(
        signature(FAIL_TASK, args=(backtest_id,), immutable=True)
    )
    return chord(replays)(callback)


def _launch(backtest_id: int) -> None:
    try:
        launch_chord(backtest_id)
    except Exception as error:  # the broker is down or refused: say so on the backtest
        logger.exception("backtest #%s could not be queued", backtest_id)
        backtest_fail(backtest_id=backtest_id, error=f"could not queue the replays: {error}")


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


def _maps(corpus_id: int, index: CorpusIndex) -> tuple[dict, dict]:
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
    backtest = Backtest.objects.only("task_ids", "baseline_version_id", "candidate_version_id").get(
        pk=backtest_id
    )
    store.frame_of_version(backtest.baseline_version_id)
    store.frame_of_version(backtest.candidate_version_id)
    for task_id in backtest.task_ids:
        context = _task_context(task_id)
        index = store.corpus_index(context.task.corpus_id)
        if index.dense is not None:  # the texts selection_request embeds
            objective = context.work_frame.objective
            embed_queries([context.task.query, objective] if objective else [context.task.query])
        _maps(context.task.corpus_id, index)
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
        snapshot=_variant_frame(proposal, variants[variant]),
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


def _scored(backtest: Backtest, context: _TaskContext, bundle, index: CorpusIndex) -> dict:
    project_of, echo_of = _maps(context.task.corpus_id, index)
    # leakage is measured against the BASELINE frame's scope on both sides: a candidate that
    # widens its own scope must not make its leakage read zero by moving the yardstick
    _number, baseline_frame = store.frame_of_version(backtest.baseline_version_id)
    return score_bundle(bundle, context.ledger, project_of=project_of, echo_of=echo_of, scope=baseline_frame.scope_set)


def _index_of(context: _TaskContext, indexes: dict[int, CorpusIndex]) -> CorpusIndex:
    """The task's corpus index, looked up once per chunk (`indexes`), not once per replay."""
    corpus_id = context.task.corpus_id
    if corpus_id not in indexes:
        indexes[corpus_id] = store.corpus_index(corpus_id)
    return indexes[corpus_id]


def _replay_compute(backtest: Backtest, task_id: int, side: str, indexes: dict[int, CorpusIndex]) -> _Outcome:
    """Run one (task, side) through the engine and score it; writes nothing."""
    context = _task_context(task_id)
    variant = _variant_index(side)
    if variant is not None:
        number, frame = None, _variant(backtest.pk, variant)
    else:
        version_id = backtest.baseline_version_id if side == ReplaySide.BASELINE else backtest.candidate_version_id
        number, frame = store.frame_of_version(version_id)
    result, index = _select(context, frame, backtest.condition, _index_of(context, indexes))
    metrics = _scored(backtest, context, result.bundle, index)
    return _Outcome(task_id, side, metrics, context, result=result, frame_version=number)


def _reused_baselines(
    backtest: Backtest, task_ids: list[int], indexes: dict[int, CorpusIndex]
) -> dict[int, _Outcome]:
    """Baseline replays another backtest already made with the same inputs (reuse.baseline_key):
    task id -> an outcome naming that replay's trace, its metrics scored again here."""
    if not task_ids:
        return {}
    contexts = {t: _task_context(t) for t in task_ids}
    fingerprints = _fingerprints(contexts.values(), indexes)
    keys = {
        reuse.baseline_key(backtest, task_id, fingerprints[context.task.corpus_id]): task_id
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
        metrics = _scored(backtest, context, ContextBundle.from_dict(bundle), _index_of(context, indexes))
        outcomes[task_id] = _Outcome(
            task_id, ReplaySide.BASELINE, metrics, context, reused_trace_id=trace_id, reuse_key=key
        )
    return outcomes


def _fingerprints(contexts: Iterable[_TaskContext], indexes: dict[int, CorpusIndex]) -> dict[int, str]:
    """corpus id -> the fingerprint of the rows its index in this process was built from."""
    return {
        context.task.corpus_id: store.corpus_index_fingerprint(context.task.corpus_id, _index_of(context, indexes))
        for context in contexts
    }


def _baseline_keys(backtest: Backtest, outcomes: list[_Outcome], indexes: dict[int, CorpusIndex]) -> None:
    """The reuse key of each baseline replay made here, stored with its row for later backtests."""
    fresh = [o for o in outcomes if o.side == ReplaySide.BASELINE and not o.reuse_key]
    if not fresh:
        return
    fingerprints = _fingerprints((o.context for o in fresh), indexes)
    for outcome in fresh:
        outcome.reuse_key = reuse.baseline_key(
            backtest, outcome.task_id, fingerprints[outcome.context.task.corpus_id]
        )


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
                TraceEntry(o.result, o.context.task.project, o.frame_version, o.context.task, TRACE_SOURCE)
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
            "id", "status", "task_ids", "condition", "baseline_version_id", "candidate_version_id"
        ).get(pk=backtest_id)
        members = set(backtest.task_ids)
        for task_id, _side in missing:
            if task_id not in members:
                raise BacktestError(f"task {task_id} is not in backtest #{backtest_id}")
        if backtest.status == BacktestStatus.QUEUED:
            Backtest.objects.filter(pk=backtest_id, status=BacktestStatus.QUEUED).update(status=BacktestStatus.RUNNING)
        indexes: dict[int, CorpusIndex] = {}
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


# --- shadow replay: recorded live selections under both versions ------------------------------

# the sources of live selections: the `select` command, the API, the MCP server (a replay on the
# trace page, an evaluation, a backtest or a shadow replay is not an agent's selection)
LIVE_SOURCES = ("select", "api", "mcp")
SHADOW_SOURCE = "shadow"
MAX_SHADOW = 200  # recorded selections one backtest may replay


def shadow_selections(*, project: Project, limit: int) -> list[int]:
    """The project's last `limit` live selections (trace ids, newest first)."""
    if limit <= 0:
        return []
    return list(
        Trace.objects.filter(project=project, source__in=LIVE_SOURCES)
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)[:limit]
    )


def _shadow_plan(project: Project, shadow: int | None) -> dict:
    requested = settings.FG_BACKTEST_SHADOW if shadow is None else shadow
    if not 0 <= requested <= MAX_SHADOW:
        raise BacktestRefused(f"a shadow replay takes 0 to {MAX_SHADOW} recorded selections, not {requested}")
    if not requested:
        return {}
    return {"requested": requested, "traces": shadow_selections(project=project, limit=requested)}


def shadow_one(*, backtest_id: int, trace_id: int) -> ShadowReplay:
    """Replay one recorded selection with its stored inputs (query, work frame, budget, standpoint,
    condition, routing inputs) under the baseline and the candidate version, write both traces
    (source "shadow") and what changed, once. A selection that cannot be replayed under a side
    (a trace older than the inputs it needs, a work type the candidate removes) is stored with
    its error, not raised: the backtest goes on."""
    found = ShadowReplay.objects.filter(backtest_id=backtest_id, selection_id=trace_id).first()
    if found is not None:
        return found
    backtest = Backtest.objects.only("id", "status", "shadow", "baseline_version_id", "candidate_version_id").get(
        pk=backtest_id
    )
    if trace_id not in (backtest.shadow or {}).get("traces", []):
        raise BacktestError(f"trace {trace_id} is not among backtest #{backtest_id}'s recorded selections")
    if backtest.status == BacktestStatus.QUEUED:
        Backtest.objects.filter(pk=backtest_id, status=BacktestStatus.QUEUED).update(status=BacktestStatus.RUNNING)
    recorded = Trace.objects.select_related("project", "task").get(pk=trace_id)
    row = {"backtest_id": backtest_id, "selection_id": trace_id}
    try:
        stored = store.trace_result(recorded)
        inputs = stored_inputs(recorded, stored)
    except (LookupError, ValueError, TypeError) as error:
        return _shadow_write(row, error=f"trace {trace_id} cannot be replayed from what it stores: {error}")
    index = store.corpus_index(recorded.project.corpus_id)
    project_of, _echo_of = _maps(recorded.project.corpus_id, index)
    base_number, base_frame = store.frame_of_version(backtest.baseline_version_id)
    cand_number, cand_frame = store.frame_of_version(backtest.candidate_version_id)
    results = {}
    errors = []
    for side, frame in ((ReplaySide.BASELINE, base_frame), (ReplaySide.CANDIDATE, cand_frame)):
        try:
            results[side] = selection_run(replace(inputs, project_frame=frame), index, config=stored.trace.config)
        except SelectionError as error:
            errors.append(f"{side}: {error}")
    if errors:
        return _shadow_write(row, error="; ".join(errors))
    base, cand = results[ReplaySide.BASELINE], results[ReplaySide.CANDIDATE]
    base_units, cand_units = base.bundle.unit_ids(), cand.bundle.unit_ids()
    scope = base_frame.scope_set

    def leak(units) -> float:
        return leakage([u for u in units if u in project_of], project_of, scope)

    def traced() -> dict:
        return {
            "baseline_trace": trace_write(
                base, project=recorded.project, frame_version=base_number, task=recorded.task, source=SHADOW_SOURCE
            ),
            "candidate_trace": trace_write(
                cand, project=recorded.project, frame_version=cand_number, task=recorded.task, source=SHADOW_SOURCE
            ),
        }

    return _shadow_write(
        row,
        traced,
        changed=base.bundle.digest != cand.bundle.digest,
        reproduced=base.bundle.digest == recorded.bundle_digest,
        entered=[u for u in cand_units if u not in set(base_units)],
        left=[u for u in base_units if u not in set(cand_units)],
        baseline_tokens=base.bundle.tokens,
        candidate_tokens=cand.bundle.tokens,
        baseline_leakage=leak(base_units),
        candidate_leakage=leak(cand_units),
    )


def _shadow_write(row: dict, traced=None, **fields) -> ShadowReplay:
    """The row, and the traces `traced` writes, in one transaction; a lost race keeps the winner's."""
    try:
        with transaction.atomic():
            return ShadowReplay.objects.create(**row, **(traced() if traced else {}), **fields)
    except IntegrityError:
        # a concurrent run of this shadow replay committed first: its row stands, ours rolled back
        existing = ShadowReplay.objects.filter(**row).first()
        if existing is None:
            raise
        return existing


# --- finish or fail --------------------------------------------------------------------------


def _summary(decision: gate_rules.Decision) -> str:
    verdict = "passed" if decision.passed else "failed"
    primary = decision.primary
    head = (
        f"{verdict}: {primary.metric} {gate_rules.signed(primary.delta)} "
        f"({gate_rules.fmt(primary.baseline)} → {gate_rules.fmt(primary.candidate)})"
    )
    breached = [g.reason for g in decision.gates[1:] if not g.passed]
    return "; ".join([head, *breached])


def backtest_finish(*, backtest_id: int) -> BacktestDecision:
    """Judge every replay against the gates: the decision, the backtest finished, the audit row.

    Running it again returns the stored decision and writes nothing.
    """
    with transaction.atomic():
        backtest = (
            Backtest.objects.select_for_update(of=("self",))
            .select_related("proposal", "proposal__project", "baseline_version", "candidate_version")
            .get(pk=backtest_id)
        )
        if backtest.status == BacktestStatus.FINISHED:
            return BacktestDecision.objects.get(backtest=backtest)
        if backtest.status == BacktestStatus.ERROR:
            raise BacktestError(f"backtest #{backtest_id} ended in error: {backtest.error}")
        uids = dict(Task.objects.filter(pk__in=backtest.task_ids).values_list("id", "uid"))
        sides: dict[str, dict[int, dict]] = {ReplaySide.BASELINE: {}, ReplaySide.CANDIDATE: {}}
        for task_id, side, metrics in TaskReplay.objects.filter(backtest=backtest).values_list(
            "task_id", "side", "metrics"
        ):
            sides[side][task_id] = metrics
        missing = [f"{uids.get(t, t)} ({side})" for t in backtest.task_ids for side in sides if t not in sides[side]]
        if missing:
            raise BacktestError(f"backtest #{backtest_id} lacks {len(missing)} replays: {', '.join(missing[:5])}")
        order = [(t, uids[t]) for t in backtest.task_ids]
        decision = gate_rules.decide(
            gate_rules.Gates.from_spec(backtest.gates),
            {uid: sides[ReplaySide.BASELINE][t] for t, uid in order},
            {uid: sides[ReplaySide.CANDIDATE][t] for t, uid in order},
        )
        effects = _ablation_effects(backtest, order, sides)
        shadowed = set(ShadowReplay.objects.filter(backtest=backtest).values_list("selection_id", flat=True))
        unshadowed = [t for t in (backtest.shadow or {}).get("traces", []) if t not in shadowed]
        if unshadowed:
            raise BacktestError(
                f"backtest #{backtest_id} lacks the shadow replay of {len(unshadowed)} selections: "
                + ", ".join(f"trace {t}" for t in unshadowed[:5])
            )
        per_task = [{"task_id": t, **row.as_dict()} for (t, _uid), row in zip(order, decision.per_task, strict=True)]
        row = BacktestDecision.objects.create(
            backtest=backtest,
            passed=decision.passed,
            primary_metric=decision.primary_metric,
            baseline_means=decision.baseline_means,
            candidate_means=decision.candidate_means,
            gate_results=[g.as_dict() for g in decision.gates],
            per_task_deltas=per_task,
            ablation=[e.as_dict() for e in effects],
        )
        backtest.status = BacktestStatus.FINISHED
        backtest.finished_at = timezone.now()
        backtest.save(update_fields=["status", "finished_at"])
        proposal = backtest.proposal
        audit_record(
            actor=None,
            project=proposal.project,
            action="backtest.finished",
            obj=backtest,
            summary=f"backtest #{backtest.pk} of proposal #{proposal.pk} {_summary(decision)}",
            payload={
                "proposal": proposal.pk,
                "passed": decision.passed,
                "baseline_version": backtest.baseline_version.number,
                "candidate_version": backtest.candidate_version.number,
                "gates": row.gate_results,
                "flagged_parts": [e.part for e in effects if e.flagged],
            },
        )
        proposal_sync_state(proposal=proposal)
    return row


def _ablation_effects(backtest: Backtest, order, sides) -> list[ablation_rules.PartEffect]:
    """Each part's effect from the variants' replays (none without an ablation plan)."""
    ablation = backtest.ablation or {}
    variants = ablation.get("variants") or []
    if not variants:
        return []
    found: dict[int, dict[int, dict]] = {i: {} for i in range(len(variants))}
    for task_id, variant, metrics in AblationReplay.objects.filter(backtest=backtest).values_list(
        "task_id", "variant", "metrics"
    ):
        found[variant][task_id] = metrics
    missing = [f"{uid} (variant {i})" for i in found for t, uid in order if t not in found[i]]
    if missing:
        raise BacktestError(
            f"backtest #{backtest.pk} lacks {len(missing)} ablation replays: {', '.join(missing[:5])}"
        )
    chosen = ablation_rules.plan(ablation["parts"])
    if [list(v) for v in chosen.variants] != variants:
        raise BacktestError(f"backtest #{backtest.pk}: its ablation variants do not follow its parts")
    return ablation_rules.ablate(
        backtest.gates,
        chosen,
        {uid: sides[ReplaySide.BASELINE][t] for t, uid in order},
        {uid: sides[ReplaySide.CANDIDATE][t] for t, uid in order},
        {i: {uid: found[i][t] for t, uid in order} for i in found},
    )


def backtest_fail(*, backtest_id: int, error: str) -> Backtest:
    """Mark a backtest that cannot finish as errored (its proposal waits for another run)."""
    with transaction.atomic():
        backtest = (
            Backtest.objects.select_for_update(of=("self",))
            .select_related("proposal", "proposal__project")
            .get(pk=backtest_id)
        )
        if backtest.status in (BacktestStatus.FINISHED, BacktestStatus.ERROR):
            return backtest
        backtest.status = BacktestStatus.ERROR
        backtest.error = error[:2000]
        backtest.finished_at = timezone.now()
        backtest.save(update_fields=["status", "error", "finished_at"])
        proposal = backtest.proposal
        audit_record(
            actor=None,
            project=proposal.project,
            action="backtest.failed",
            obj=backtest,
            summary=f"backtest #{backtest.pk} of proposal #{proposal.pk} failed: {backtest.error}",
            payload={"proposal": proposal.pk, "error": backtest.error},
        )
        proposal_sync_state(proposal=proposal)
    return backtest


# --- reviews -------------------------------------------------------------------------------------


def backtest_review(
    *, backtest: Backtest, reviewer, verdict: str, comment: str = "", acknowledged: Iterable[str] = ()
) -> Approval:
    """A reviewer's verdict, bound to this exact backtest: candidate version, task set, engine.

    Four eyes: the proposal's author never reviews it, each reviewer gives one verdict, and the
    project's approval policy (its current frame's `approval` key) says when the tally is enough.
    The gates compare means, so one task can fall while they pass: an approval names each task the
    backtest made worse (review_card.regressed_tasks) in `acknowledged`, or it is refused with
    RegressionsUnacknowledged listing the rest. A rejection needs no acknowledgement.
    """
    acknowledged = [str(a) for a in acknowledged or ()]
    project = backtest.proposal.project
    access.access_review(reviewer, project)
    if verdict not in ApprovalVerdict.values:
        raise ReviewRefused(f'verdict "{verdict}" is not one of: {", ".join(ApprovalVerdict.values)}')
    comment = (comment or "").strip()
    if verdict == ApprovalVerdict.REJECT and not comment:
        raise ReviewRefused("a rejection needs a comment saying why")
    with transaction.atomic():
        Project.objects.select_for_update().get(pk=project.pk)
        backtest = Backtest.objects.select_related("proposal", "proposal__project").get(pk=backtest.pk)
        blockers = selectors.review_blockers(backtest=backtest, reviewer=reviewer)
        decision = selectors.backtest_decision(backtest)
        if not blockers and verdict == ApprovalVerdict.APPROVE and not decision.passed:
            blockers = [f"backtest #{backtest.pk} failed its gates: it can be rejected, not approved"]
        if blockers:
            raise ReviewRefused("; ".join(blockers))
        regressed = review_card.regressed_tasks(backtest=backtest) if verdict == ApprovalVerdict.APPROVE else []
        missing = review_card.missing_acknowledgements(regressed, acknowledged)
        if missing:
            raise RegressionsUnacknowledged(missing)
        approval = Approval.objects.create(
            backtest=backtest,
            frame_version_id=backtest.candidate_version_id,
            task_set_digest=backtest.task_set_digest,
            engine_version=backtest.engine_version,
            reviewer=reviewer,
            verdict=verdict,
            comment=comment,
        )
        proposal = backtest.proposal
        proposal_sync_state(proposal=proposal)
        audit_record(
            actor=reviewer,
            project=project,
            action=f"backtest.{'approved' if verdict == ApprovalVerdict.APPROVE else 'rejected'}",
            obj=approval,
            summary=f"{verdict} backtest #{backtest.pk} of proposal #{proposal.pk}",
            payload={
                "proposal": proposal.pk,
                "backtest": backtest.pk,
                "frame_version": backtest.candidate_version.number,
                "task_set_digest": backtest.task_set_digest,
                "engine_version": backtest.engine_version,
                "comment": comment,
                # the regressed tasks this approval looked at, in the backtest's task order
                "acknowledged": [r.task for r in regressed],
                "tally": selectors.review_tally(backtest).summary,
            },
        )
    return approval


MAX_COMMENT_CHARS = 20_000


class CommentRefused(InputRefused):
    """A comment that cannot be stored: empty, too long, or on a task its backtest did not replay."""


def review_comment(
    *, proposal: Proposal, author, body: str, backtest: Backtest | None = None, task_id: int | None = None
) -> ReviewComment:
    """One message in a proposal's review discussion, on the proposal or on one task row of one of
    its backtests; append-only (trigger) and audited. Leads and reviewers may comment."""
    project = proposal.project
    access.access_comment(author, project)
    body = (body or "").strip()
    if not body:
        raise CommentRefused("a comment needs some text", field=("body",))
    if len(body) > MAX_COMMENT_CHARS:
        raise CommentRefused(
            f"a comment holds at most {MAX_COMMENT_CHARS} characters ({len(body)} given)", field=("body",)
        )
    if task_id is not None and backtest is None:
        raise CommentRefused("a comment on a task names the backtest whose row it is", field=("backtest",))
    if backtest is not None and backtest.proposal_id != proposal.pk:
        raise CommentRefused(
            f"backtest #{backtest.pk} is not a backtest of proposal #{proposal.pk}", field=("backtest",)
        )
    task_uid = None
    if task_id is not None:
        if task_id not in backtest.task_ids:
            raise CommentRefused(f"task {task_id} is not in backtest #{backtest.pk}", field=("task",))
        task_uid = Task.objects.values_list("uid", flat=True).get(pk=task_id)
    with transaction.atomic():
        comment = ReviewComment.objects.create(
            proposal=proposal, backtest=backtest, task_id=task_id, author=author, body=body
        )
        where = f" on task {task_uid} of backtest #{backtest.pk}" if task_uid else ""
        audit_record(
            actor=author,
            project=project,
            action="proposal.commented",
            obj=comment,
            summary=f"comment on proposal #{proposal.pk}{where}",
            payload={
                "proposal": proposal.pk,
                "backtest": backtest.pk if backtest else None,
                "task": task_uid,
                "body": body,
            },
        )
    return comment


# --- governance's hooks ------------------------------------------------------------------------


def on_proposal_submitted(sender, *, proposal: Proposal, requested_by, **kwargs) -> None:
    """governance.signals.proposal_submitted: start the proposal's backtest once it commits.

    robust: the proposal is committed whatever the queue does; a failed enqueue is logged.
    """
    transaction.on_commit(lambda: backtest_enqueue(proposal=proposal, requested_by=requested_by), robust=True)


# --- jobs that cannot hang -------------------------------------------------------------------

MAX_REPLAY_DELIVERIES = 3  # deliveries of one replay that died with its worker, retries aside


def _delivery_counted(app, key: str) -> int | None:
    """This delivery counted under `key` in the result backend; None without a backend client."""
    client = getattr(app.backend, "client", None)
    if client is None:  # a backend without a client (tests' eager mode): nothing to count with
        return None
    deliveries = client.incr(key)
    client.expire(key, 24 * 3600)
    return deliveries


def _deliveries_exceeded(backtest_id: int, what: str, deliveries: int) -> bool:
    backtest_fail(
        backtest_id=backtest_id,
        error=(
            f"{what} was delivered {deliveries - 1} times and its "
            "worker died each time: the backtest stopped instead of retrying it forever"
        ),
    )
    return False


def _task_label(task_id: int) -> str:
    return str(Task.objects.filter(pk=task_id).values_list("uid", flat=True).first() or task_id)


def replay_delivery_allowed(app, *, backtest_id: int, task_id: int, side: str, retries: int) -> bool:
    """Count this delivery of one replay; past MAX_REPLAY_DELIVERIES the backtest fails instead.

    With acks_late and reject_on_worker_lost, a replay that crashes its worker (out of memory, a
    segfault, SIGKILL) is delivered again; the count lives in the result backend (redis) because
    the crash leaves no chance to write anything else. Retries of one delivery do not count.
    """
    deliveries = _delivery_counted(app, f"fg:replay-deliveries:{backtest_id}:{task_id}:{side}:{retries}")
    if deliveries is None or deliveries <= MAX_REPLAY_DELIVERIES:
        return True
    if side == "shadow":  # a shadow replay's "task" is the recorded selection's trace
        what = f"the shadow replay of trace {task_id}"
    else:
        what = f"the replay of task {_task_label(task_id)} ({side})"
    return _deliveries_exceeded(backtest_id, what, deliveries)


def chunk_delivery_allowed(app, *, backtest_id: int, pairs, retries: int) -> bool:
    """replay_delivery_allowed for a chunk of (task, side) pairs (a backtest's chunks never share
    a pair, so the first pair and the length name it)."""
    if not pairs:
        return True
    (task_id, side), count = pairs[0], len(pairs)
    key = f"fg:replay-deliveries:{backtest_id}:chunk:{task_id}:{side}:{count}:{retries}"
    deliveries = _delivery_counted(app, key)
    if deliveries is None or deliveries <= MAX_REPLAY_DELIVERIES:
        return True
    what = f"the chunk of {count} replays from task {_task_label(task_id)} ({side})"
    return _deliveries_exceeded(backtest_id, what, deliveries)


def stale_after() -> timedelta:
    return timedelta(seconds=settings.FG_BACKTEST_STALE_SECONDS)


def backtest_stale_reason(backtest: Backtest, *, now=None) -> str | None:
    """The rule: a queued or running backtest with no new replay for FG_BACKTEST_STALE_SECONDS
    (since it was queued or since its latest replay) has lost its workers or its messages."""
    if backtest.status not in (BacktestStatus.QUEUED, BacktestStatus.RUNNING):
        return None
    latest = TaskReplay.objects.filter(backtest=backtest).aggregate(at=Max("created_at"))["at"]
    latest_variant = AblationReplay.objects.filter(backtest=backtest).aggregate(at=Max("created_at"))["at"]
    latest_shadow = ShadowReplay.objects.filter(backtest=backtest).aggregate(at=Max("created_at"))["at"]
    last_progress = max(filter(None, [backtest.created_at, latest, latest_variant, latest_shadow]))
    idle = (now or timezone.now()) - last_progress
    if idle < stale_after():
        return None
    return (
        f"stale: no replay for {int(idle.total_seconds())} s ({replays_done(backtest)} of "
        f"{replays_expected(backtest)} done); its workers vanished or its messages were lost"
    )


def backtest_fail_if_stale(*, backtest: Backtest) -> Backtest:
    """Apply the stale rule (on page load and in `backtest` waits): mark it failed, with why."""
    reason = backtest_stale_reason(backtest)
    if reason is None:
        return backtest
    return backtest_fail(backtest_id=backtest.pk, error=reason)


def backtest_rerun(*, backtest: Backtest, lead) -> Backtest:
    """A lead starts the proposal again after a failed (errored or stale) backtest."""
    access.access_propose(lead, backtest.proposal.project)
    backtest = backtest_fail_if_stale(backtest=backtest)
    if backtest.status != BacktestStatus.ERROR:
        raise BacktestRefused(
            f"backtest #{backtest.pk} is {backtest.status}: only a failed or stale backtest is re-run"
        )
    latest = Backtest.objects.filter(proposal_id=backtest.proposal_id).order_by("-created_at", "-id").first()
    if latest is not None and latest.pk != backtest.pk:
        raise BacktestRefused(f"backtest #{latest.pk} is newer: re-run the latest only")
    return backtest_enqueue(proposal=backtest.proposal, requested_by=lead)
