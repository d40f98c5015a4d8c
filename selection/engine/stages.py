"""The staged policy over one pool: routing's envelope, retrieval (widened), signals, eligibility,
ranking, coalescing and admission within the budget, each stage summarised."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import signals as sig
from .budget import admit_within_budget
from .candidate_records import retrieval_parts
from .candidate_signals import compute_signals
from .coalesce import coalesce, one_item_each
from .conditions import Condition
from .outputs import SIGNAL_NAMES, CoalescingOp, StageSummary
from .policy import Working, apply_eligibility, preferences
from .ranking import rank
from .reason_codes import Stage
from .retrieval import build_pool
from .timings import TimedStage, timed
from .widening import widen_pool


def run_stages(
    request, index, config, condition: Condition, standpoint, scope, budget, timings, envelope=(),
    *, barred=frozenset(),
):
    """`barred`: units ranked retrieval may not admit (bounded routing: the ones it did not load);
    they never become candidates, so ranking orders and budgets only what routing admitted."""
    frame, work = request.project_frame, request.work_frame
    routed = _admit_envelope(envelope, index, request, standpoint, scope, budget)
    spent = sum(d.tokens for d in routed if d.admitted)
    prefs = preferences(condition, frame, work)
    searches: dict = {}  # widening's rounds differ only in the cut: each searches once
    with timed(timings, TimedStage.RETRIEVAL):
        pool = widen_pool(
            lambda cfg: build_pool(
                index,
                query=request.query,
                query_vector=request.query_vector,
                objective=work.objective,
                objective_vector=request.objective_vector,
                condition=condition,
                preferences=prefs,
                scope=scope,
                class_pull=frame.class_pull,
                standpoint=standpoint,
                config=cfg,
                open_loops=condition.class_policy in ("work_type", "merged")
                and sig.open_loop_weight(frame, work.work_type) > 0,
                searches=searches,
            ),
            index,
            config if condition.pool_widening else replace(config, pool_widen_max=config.pool_size),
            scope if condition.scope_filter else None,
        )
    # routed units are already in the bundle (or omitted by the budget): they do not compete again
    in_envelope = frozenset(u.id for u in envelope)
    skip = in_envelope | barred
    head = _query_head(pool, index, condition, scope, budget - spent, skip)
    order = [pos for pos in pool.order if index.units[pos].id not in skip]
    if barred:
        pool.counts["routing_barred"] = sum(1 for pos in pool.score if index.units[pos].id in barred)
    candidates = [
        Working(pos, index.units[pos], i + 1, pool.score[pos]) for i, pos in enumerate(order)
    ]
    for r, c in enumerate(sorted(candidates, key=lambda c: (-c.query_score, c.uid)), start=1):
        c.retrieval_rank = r
    positions = np.asarray(order, dtype=np.int64)
    jaccard = compute_signals(candidates, positions, index, request, standpoint, scope, pool)
    retrieval_parts(candidates, pool, config.rrf_k)
    stages = [
        StageSummary(
            Stage.RETRIEVAL.value,
            len(index),
            len(candidates),
            tuple((k, str(v)) for k, v in sorted(pool.counts.items())),
        )
    ]
    stages.append(StageSummary(Stage.SIGNALS.value, len(candidates), len(candidates)))

    eligible = apply_eligibility(
        candidates,
        index=index,
        condition=condition,
        scope=scope,
        prefs=prefs,
        standpoint=standpoint,
        config=config,
        budget_tokens=budget,
        head=head,
    )
    stages.append(StageSummary(Stage.ELIGIBILITY.value, len(candidates), len(eligible)))
    ranked = rank(
        eligible,
        condition=condition,
        prefs=prefs,
        config=config,
        open_loop_applies=condition.class_policy in ("work_type", "merged"),
        head=head,
    )
    stages.append(StageSummary(Stage.RANKING.value, len(eligible), len(ranked)))

    ops: list[CoalescingOp] = []
    if condition.coalescing:
        rejected = [c for c in candidates if not c.eligible]
        drafts, ops = coalesce(ranked, rejected, index)
        stages.append(StageSummary(Stage.COALESCING.value, len(ranked), len(drafts)))
    else:
        drafts = one_item_each(ranked)
    row_of = {pos: i for i, pos in enumerate(order)}
    decided = admit_within_budget(
        drafts,
        budget_tokens=budget,
        redundancy_threshold=config.redundancy_threshold if condition.redundancy_rule else None,
        jaccard=jaccard,
        row_of=row_of,
        spent=spent,
        stop=frame.admission if condition.admission_stop else None,
        contested=frozenset(
            c.uid for c in candidates if c.unit.refutes or index.links.refuted_by.get(c.uid)
        ),
        ops=ops,
        objective_ran=pool.objective is not None,
        unlisted_bucket=len(prefs)
        if condition.class_policy != "none" and not condition.flat_rank
        else None,
    )
    envelope_working = [m for d in routed for m in d.draft.members]
    if envelope:
        stages.insert(
            0,
            StageSummary(
                Stage.ROUTING.value,
                len(envelope),
                sum(1 for d in routed if d.admitted),
                (("envelope_tokens", str(spent)),),
            ),
        )
    return envelope_working + candidates, pool, routed + decided, ops, stages


def _query_head(pool, index, condition, scope, budget, skip) -> dict[int, int]:
    """An inferred frame's hedge: the head of the scoped query-only ranking (the query's own fused
    hits, as C0 ranks them, out-of-scope units skipped), in order until the next unit would pass
    `condition.query_head` of the budget; position -> query-only rank. Units of the head that the
    framed pool lacks join it (pulled by "query_head")."""
    if condition.query_head <= 0 or pool.query is None:
        return {}
    allowance = condition.query_head * max(budget, 0)
    head: dict[int, int] = {}
    used = 0
    fused = pool.query.fused
    for place, (pos, _) in enumerate(fused, start=1):
        unit = index.units[pos]
        if unit.id in skip or (condition.scope_filter and unit.project not in scope):
            continue
        if used + unit.tokens > allowance:
            break
        used += unit.tokens
        head[pos] = place
    # a restatement carries what it echoes: the unit an echo folds into (C6) is of the head too
    for pos, place in list(head.items()):
        unit, seen = index.units[pos], {index.units[pos].id}
        while unit.echo_of and not unit.refutes and unit.echo_of not in seen:
            root = index.position.get(unit.echo_of)
            if root is None:
                break
            seen.add(unit.echo_of)
            head.setdefault(root, place)
            unit = index.units[root]
    added = 0
    for pos, place in head.items():
        if pos not in pool.score:
            pool.add(pos, 1.0 - (place - 1) / len(fused), "query_head")
            added += 1
    pool.counts["query_head"] = len(head)
    pool.counts["query_head_added"] = added
    return head


def _admit_envelope(envelope, index, request, standpoint, scope, budget):
    """Routed units first, in routing order (root constraints first), each an atomic item."""
    if not envelope:
        return []
    working = [Working(index.position.get(u.id, -1), u, 0, 0.0) for u in envelope]
    shared = [c for c in working if c.pos >= 0]
    compute_signals(
        shared, np.asarray([c.pos for c in shared], dtype=np.int64), index, request, standpoint, scope
    )
    for c in working:
        if c.pos < 0:
            # a local overlay unit is not in the shared index: no retrieval signal describes it
            c.signals = dict.fromkeys(SIGNAL_NAMES, 0.0)
        c.eligible = True
        c.bucket = 0
    for position, c in enumerate(working, start=1):
        c.rank = position
        c.retrieval_rank = 0
    return admit_within_budget(one_item_each(working), budget_tokens=budget)
