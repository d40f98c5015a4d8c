"""select(request, index) -> SelectionResult: the staged policy, one record per candidate, no Django,
and no clock but the StageTimings a caller may pass in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from . import signals as sig
from .budget import admit_within_budget
from .candidate_records import own_relevance, retrieval_parts, retriever_config
from .candidate_records import records as candidate_records
from .coalesce import coalesce, one_item_each
from .conditions import Condition, effective_condition, get_condition
from .index import CorpusIndex
from .outputs import (
    SIGNAL_NAMES,
    BundleItem,
    CoalescingOp,
    ContextBundle,
    ContextTrace,
    SelectionResult,
    StageSummary,
)
from .policy import (
    Working,
    apply_eligibility,
    class_order,
    preferences,
    rank,
    work_type_preferences,
)
from .reason_codes import ReasonCode, Stage
from .render import render_bundle
from .retrieval import Pool, build_pool, search
from .routing.report import strict_refusal
from .routing.route import route, structural_conflicts
from .routing.types import RoutingReport
from .timings import StageTimings, TimedStage, timed
from .types import EngineConfig, SelectionRequest, Unit
from .widening import widen_pool

# Bumped whenever a default changes what a selection admits: approvals are bound to it (a promotion
# approved under another engine asks for a new backtest), and traces, evaluations and frame health
# readings record it. 0.2.0 (sixth session): a frame that declares no stop rule gets the engine's
# default (the unlisted floor, AdmissionPolicy DEFAULT_ADMISSION) instead of the budget alone.
ENGINE_VERSION = "frame-governance-engine/0.2.0"
POLICY_VERSION = "staged-frame-conditioned-v1"
TRACE_SCHEMA = "context-trace/v1"



def select(
    request: SelectionRequest,
    index: CorpusIndex,
    config: EngineConfig | None = None,
    *,
    timings: StageTimings | None = None,
) -> SelectionResult:
    """Build the context bundle and its trace for one request.

    The ledger is read only under the oracle condition CO; C0..C6 never look at it. `timings`, when
    given, records the retrieval and trace-record stages (it changes nothing in the result).
    """
    config = config or EngineConfig()
    if request.budget_tokens < 0:
        raise ValueError("budget_tokens must be >= 0")
    named = get_condition(request.condition)
    work = _canonical_work_frame(request.work_frame)
    standpoint = request.standpoint or work.standpoint
    frame = request.project_frame
    scope = frame.scope_set
    budget = request.budget_tokens

    routing: RoutingReport | None = None
    envelope: list[Unit] = []
    if not named.oracle:
        routing = route(
            index.units,
            project=frame.project,
            policy=frame.routing,
            inputs=request.routing,
            standpoint=standpoint,
            local_units=request.local_units,
        )
        if routing.work_type and (not work.work_type or work.establishment != "declared"):
            # the frame maps the declared task category to exactly one work type: a declared
            # input, which an inferred (or absent) work type never outranks
            work = replace(work, work_type=routing.work_type, establishment="declared")
            request = replace(request, work_frame=work)
    condition, note = effective_condition(
        named,
        work.establishment,
        enabled=config.abstention,
        policy=request.project_frame.establishment,
    )
    class_list, class_reason = class_order(condition, request.project_frame, work)
    if condition.oracle:
        # the oracle is a ceiling read off the ledger, not a system: routing does not apply
        candidates, pool, drafts_decided, ops, stages = _oracle(
            request, index, config, standpoint, timings
        )
    else:
        if request.routing.strict:
            status, why = strict_refusal(routing)
            if status:
                return _refused(request, index, config, named, condition, note, work, standpoint, routing, why)
        local = {u.id: u for u in request.local_units}
        envelope = [index.unit(uid) or local[uid] for uid in routing.envelope]
        candidates, pool, drafts_decided, ops, stages = _ladder(
            request, index, config, condition, standpoint, scope, budget, timings, envelope
        )

    drafts_decided, order_rule = _bundle_order(drafts_decided, request.project_frame, condition)
    items = tuple(
        BundleItem(
            item_id=d.draft.item_id,
            sources=d.draft.sources,
            evidence_class=d.draft.primary.unit.evidence_class,
            project=d.draft.primary.unit.project,
            text=d.draft.primary.unit.text,
            contradicts=d.draft.contradicts,
            notes=tuple(d.draft.notes),
            rendered=d.rendered,
            tokens=d.tokens,
        )
        for d in drafts_decided
        if d.admitted
    )
    rendered, tokens, digest = render_bundle([i.rendered for i in items])
    bundle = ContextBundle(
        items=items, rendered=rendered, tokens=tokens, digest=digest, budget_tokens=budget
    )
    admitted_items = sum(1 for d in drafts_decided if d.admitted)
    stages.append(
        StageSummary(
            Stage.BUDGET.value,
            len(drafts_decided),
            admitted_items,
            (("bundle_tokens", str(tokens)),),
        )
    )

    if routing is not None:
        admitted = bundle.unit_ids()
        routing = replace(
            routing,
            conflicts=structural_conflicts(
                index.units, among=admitted, standpoint=standpoint, extra=request.local_units
            ),
            budget_omissions=tuple(
                u.id for u in envelope if u.id not in frozenset(admitted)
            ),
        )
        if request.routing.strict:
            status, why = strict_refusal(routing)
            if status:
                return _refused(request, index, config, named, condition, note, work, standpoint, routing, why)

    with timed(timings, TimedStage.TRACE_RECORDS):
        records = candidate_records(candidates, pool, routing)
    trace = _context_trace(
        request, index, config, named, condition, note, work, standpoint, routing, pool,
        budget_tokens=budget,
        candidates=records,
        coalescing=tuple(ops),
        stages=tuple(stages),
        bundle_digest=digest,
        bundle_tokens=tokens,
        class_order=class_list,
        class_order_reason=class_reason,
        order_rule=order_rule,
    )
    return SelectionResult(bundle=bundle, trace=trace)


def _bundle_order(decided, frame, condition):
    """The rendered order (frame policy `bundle_order`): routed items first, in routing order, then
    the ranked evidence by bucket; inside a bucket by rank, or by unit id under "stable". Only the
    order of admitted items changes: what was admitted was decided in rank order."""
    if condition.oracle:
        return decided, "oracle: MUST then SHOULD units, each in id order"
    routed = [d for d in decided if d.draft.primary.pool_rank == 0]
    ranked = [d for d in decided if d.draft.primary.pool_rank != 0]
    if frame.bundle_order == "stable":
        ranked = sorted(ranked, key=lambda d: (d.draft.primary.bucket or 0, d.draft.primary.uid))
        inside = "by unit id inside a bucket (stable)"
    else:
        inside = "by rank inside a bucket"
    return routed + ranked, (
        "routed envelope first (root constraints, then routing order: a query-independent "
        f"prefix), then evidence by class bucket, {inside}"
    )


def _context_trace(request, index, config, named, condition, note, work, standpoint, routing, pool, **decided):
    """The trace of a selection, made or refused: what was asked, under which frame and condition,
    and what was `decided` (candidates, stages, the bundle's digest and tokens, the class order)."""
    frame = request.project_frame
    return ContextTrace(
        schema=TRACE_SCHEMA,
        engine_version=ENGINE_VERSION,
        policy_version=POLICY_VERSION,
        condition=named.name,
        effective_condition=condition.name,
        condition_note=note,
        project_frame=replace(frame, work_types=tuple(sorted(frame.work_types))),
        work_frame=work,
        query=request.query,
        standpoint=standpoint,
        config=config,
        retriever=retriever_config(index, request, pool, config),
        routing=routing,
        **decided,
    )


def _refused(request, index, config, named, condition, note, work, standpoint, routing, why):
    """Strict routing: no bundle at all, and a trace that says why (and when a person must decide)."""
    rendered, tokens, digest = render_bundle([])
    bundle = ContextBundle(
        items=(), rendered=rendered, tokens=tokens, digest=digest, budget_tokens=request.budget_tokens
    )
    routing = replace(routing, refused=True, refusal=why, budget_omissions=())
    trace = _context_trace(
        request, index, config, named, condition, note, work, standpoint, routing, Pool(),
        budget_tokens=request.budget_tokens,
        candidates=(),
        coalescing=(),
        stages=(
            StageSummary(
                Stage.ROUTING.value,
                len(routing.dispositions),
                0,
                (("completeness", routing.completeness), ("refused", why)),
            ),
        ),
        bundle_digest=digest,
        bundle_tokens=tokens,
    )
    return SelectionResult(bundle=bundle, trace=trace)


def _canonical_work_frame(work):
    """Signal order and citation order carry no meaning; fix them so a shuffle cannot reach the
    trace.
    """
    return replace(
        work,
        signals=tuple(sorted(work.signals, key=lambda s: (s.id, s.kind, s.content))),
        cites=tuple(sorted((name, tuple(sorted(ids))) for name, ids in work.cites)),
    )


def _ladder(
    request, index, config, condition: Condition, standpoint, scope, budget, timings, envelope=()
):
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
    head = _query_head(pool, index, condition, scope, budget - spent, in_envelope)
    order = [pos for pos in pool.order if index.units[pos].id not in in_envelope]
    candidates = [
        Working(pos, index.units[pos], i + 1, pool.score[pos]) for i, pos in enumerate(order)
    ]
    for r, c in enumerate(sorted(candidates, key=lambda c: (-c.query_score, c.uid)), start=1):
        c.retrieval_rank = r
    positions = np.asarray(order, dtype=np.int64)
    jaccard = _compute_signals(candidates, positions, index, request, standpoint, scope, pool)
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
    _compute_signals(
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


def _oracle(request, index, config, standpoint, timings):
    """CO: admit MUST then SHOULD units (each label in id order) within the budget. Not a system: a
    ceiling.
    """
    if request.ledger is None:
        raise ValueError("condition CO needs request.ledger")
    ledger = request.ledger
    order = [
        uid
        for label in ("MUST", "SHOULD")
        for uid in sorted(u for u, lab in ledger.items() if lab == label)
    ]
    pool = Pool()
    with timed(timings, TimedStage.RETRIEVAL):
        pool.query = search(index, request.query, request.query_vector, config)
    fused_rank = {p: r for r, (p, _) in enumerate(pool.query.fused, start=1)}
    n = len(pool.query.fused)
    for uid in order:
        pos = index.position.get(uid)
        if pos is None or pos in pool.score:
            continue  # a ledger unit missing from memory is E0, not a candidate
        r = fused_rank.get(pos)
        pool.add(pos, 1.0 - (r - 1) / n if r is not None else 0.0, "ledger")
    pool.counts["ledger"] = len(pool.order)
    candidates = [
        Working(pos, index.units[pos], i + 1, pool.score[pos]) for i, pos in enumerate(pool.order)
    ]
    for c in candidates:
        c.retrieval_rank = c.pool_rank
        c.rank = c.pool_rank
        c.bucket = 0
        c.rank_score = round(c.query_score, 6)
    positions = np.asarray(pool.order, dtype=np.int64)
    _compute_signals(
        candidates, positions, index, request, standpoint, request.project_frame.scope_set, pool
    )
    stages = [StageSummary(Stage.ORACLE.value, len(ledger), len(candidates))]
    decided = admit_within_budget(
        one_item_each(candidates),
        budget_tokens=request.budget_tokens,
        admitted_reason=ReasonCode.ORACLE_LEDGER,
    )
    return candidates, pool, decided, [], stages


def _compute_signals(
    candidates: Sequence[Working],
    positions: np.ndarray,
    index: CorpusIndex,
    request,
    standpoint,
    scope,
    pool: Pool | None = None,
) -> np.ndarray:
    """All ten signals for every candidate, before eligibility; returns the Jaccard matrix.

    query_relevance and objective_relevance read each text's own fused list (1 - (rank - 1) / n;
    0 when absent), never the pool position that mixes the two."""
    frame, work = request.project_frame, request.work_frame
    # goal relevance always reads the work frame's own preference list, whatever the condition ranks
    # by, so the same unit's trace is comparable across conditions
    goal_prefs = work_type_preferences(frame, work.work_type)
    units = [c.unit for c in candidates]
    pos_list = [c.pos for c in candidates]
    overlap = sig.objective_overlap(index, positions, work.objective)
    class_term = sig.class_terms(goal_prefs)
    class_terms = np.asarray([class_term.get(u.evidence_class, 0.0) for u in units])
    goal = sig.goal_relevance(class_terms, overlap) if candidates else np.zeros(0)
    jaccard = sig.jaccard_matrix(index, positions)
    redundancy = sig.redundancy_before(jaccard)
    loop_weight = sig.open_loop_weight(frame, work.work_type)
    reference = standpoint or index.newest
    pool_ids = frozenset(u.id for u in units)
    own_query = own_relevance(pool.query if pool else None)
    own_objective = own_relevance(pool.objective if pool else None)
    # one column per signal over the whole pool, in SIGNAL_NAMES order; rounded as Python rounds
    columns = (
        [own_query.get(p, 0.0) for p in pos_list],
        [own_objective.get(p, 0.0) for p in pos_list],
        [round(v, 6) for v in goal.tolist()],
        [1.0 if u.project in scope else 0.0 for u in units],
        [sig.temporal_validity(u, standpoint, index) for u in units],
        [sig.evidence_strength(u) for u in units],
        [loop_weight if u.is_open_loop else 0.0 for u in units],
        [round(v, 6) for v in sig.adjacencies(index, units, pool_ids)],
        [round(v, 6) for v in sig.recencies(units, reference)],
        [round(v, 6) for v in redundancy.tolist()],
    )
    for c, values in zip(candidates, zip(*columns, strict=True), strict=True):
        c.signals = dict(zip(SIGNAL_NAMES, values, strict=True))
    return jaccard
