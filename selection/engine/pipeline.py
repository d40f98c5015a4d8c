"""select(request, index) -> SelectionResult: the staged policy, one record per candidate, no Django,
and no clock but the StageTimings a caller may pass in.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .budget import admit_within_budget
from .candidate_records import records as candidate_records
from .candidate_records import retriever_config
from .candidate_signals import compute_signals
from .coalesce import one_item_each
from .conditions import effective_condition, get_condition
from .index import CorpusIndex
from .outputs import (
    BundleItem,
    ContextBundle,
    ContextTrace,
    SelectionResult,
    StageSummary,
)
from .policy import (
    Working,
    class_order,
)
from .reason_codes import ReasonCode, Stage
from .render import render_bundle
from .retrieval import Pool
from .routing.report import barred_units, not_loaded, strict_refusal
from .routing.route import route, structural_conflicts
from .routing.types import RoutingReport
from .search import search
from .stages import run_stages
from .timings import StageTimings, TimedStage, timed
from .types import EngineConfig, SelectionRequest, Unit

# Names the defaults that decide what a selection admits, and changes with them: approvals are bound
# to it (a promotion approved under another engine asks for a new backtest), and traces, evaluations
# and frame health readings record it. Under 0.2.0 a frame that declares no stop rule gets the
# engine's default (the unlisted floor, AdmissionPolicy DEFAULT_ADMISSION), not the budget alone.
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
        candidates, pool, drafts_decided, ops, stages = run_stages(
            request, index, config, condition, standpoint, scope, budget, timings, envelope,
            barred=barred_units(routing),
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
            # envelope only: what routing did not load and ranking admitted all the same
            ranked_in=tuple(sorted(uid for uid in not_loaded(routing) if uid in frozenset(admitted))),
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
    compute_signals(
        candidates, positions, index, request, standpoint, request.project_frame.scope_set, pool
    )
    stages = [StageSummary(Stage.ORACLE.value, len(ledger), len(candidates))]
    decided = admit_within_budget(
        one_item_each(candidates),
        budget_tokens=request.budget_tokens,
        admitted_reason=ReasonCode.ORACLE_LEDGER,
    )
    return candidates, pool, decided, [], stages
