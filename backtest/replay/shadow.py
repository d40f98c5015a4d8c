"""Shadow replay: a project's recorded live selections replayed under both versions of a backtest."""

from __future__ import annotations

import logging
from dataclasses import replace

from django.conf import settings
from django.db import IntegrityError, transaction

from selection.engine.metrics import leakage
from selection.memory import store
from selection.models import Project, Trace
from selection.serving.selections import SelectionError, selection_run
from selection.traces.recording import trace_write
from selection.traces.selectors import stored_inputs

from ..errors import BacktestError, BacktestRefused
from ..models import (
    Backtest,
    BacktestStatus,
    ReplaySide,
    ShadowReplay,
)
from .services import unit_maps

logger = logging.getLogger(__name__)

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


def shadow_plan(project: Project, shadow: int | None) -> dict:
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
    project_of, _echo_of = unit_maps(recorded.project.corpus_id, index)
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
