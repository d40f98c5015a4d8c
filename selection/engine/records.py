"""Trace records: how each candidate entered the pool, what it was scored, how it was decided,
frozen into CandidateRecords (and the retriever's configuration) once select() has decided."""

from __future__ import annotations

from collections.abc import Sequence

from .index import TOKENISER, CorpusIndex
from .policy import Working
from .reason_codes import REASON_DISPOSITION, Disposition, ReasonCode, Stage
from .retrieval import Pool, QueryHits
from .routing.codes import LocalCode, RouteCode
from .routing.types import RoutingReport
from .types import (
    SIGNAL_NAMES,
    BudgetState,
    CandidateRecord,
    Effect,
    EngineConfig,
    RetrievalRecord,
    RetrieverConfig,
    SelectionRequest,
    Signals,
)


def own_relevance(hits: QueryHits | None) -> dict[int, float]:
    """Position -> 1 - (rank - 1) / n in one text's own fused list (the query's or the objective's)."""
    if hits is None or not hits.fused:
        return {}
    n = len(hits.fused)
    return {pos: round(1.0 - i / n, 6) for i, (pos, _) in enumerate(hits.fused)}


def retrieval_parts(candidates: Sequence[Working], pool: Pool, rrf_k: int) -> None:
    """What each candidate's retrieval score (query_score) is made of: the query's and the
    objective's RRF terms in proportion (C4+ fuses the two lists), or the pull that added it."""
    query = {p: r for r, (p, _) in enumerate(pool.query.fused, start=1)} if pool.query else {}
    objective = (
        {p: r for r, (p, _) in enumerate(pool.objective.fused, start=1)} if pool.objective else {}
    )
    for c in candidates:
        if c.pos not in pool.fused:
            c.base_parts = (("pull", Effect.PULLED, 1.0, pool.pulled_by.get(c.pos, "")),)
            continue
        if pool.objective is None:
            c.base_parts = (("query_relevance", Effect.FUSED, 1.0, "the query's fused list alone"),)
            continue
        q = 1.0 / (rrf_k + query[c.pos]) if c.pos in query else 0.0
        o = 1.0 / (rrf_k + objective[c.pos]) if c.pos in objective else 0.0
        parts = []
        if q:
            parts.append(("query_relevance", Effect.FUSED, q / (q + o), f"rrf share {q / (q + o):.3f}"))
        if o:
            parts.append(("objective_relevance", Effect.FUSED, o / (q + o), f"rrf share {o / (q + o):.3f}"))
        c.base_parts = tuple(parts)


def _hit(hits: QueryHits | None, ranks: dict[int, int] | None, pos: int, dense: bool):
    if hits is None:
        return None, None
    if dense:
        if hits.dense is None:
            return None, None
        return hits.dense.score(pos), ranks.get(pos)
    return float(hits.bm25[pos]), ranks.get(pos)


def records(
    candidates: Sequence[Working], pool: Pool, routing: RoutingReport | None = None
) -> tuple[CandidateRecord, ...]:
    routed = {d.unit: d.reason for d in routing.dispositions} if routing else {}
    local = {d.unit for d in routing.local} if routing else set()
    envelope = frozenset(routing.envelope) if routing else frozenset()
    positions = [c.pos for c in candidates if c.pos >= 0]
    for hits in (pool.query, pool.objective):
        if hits is not None and hits.dense is not None:
            hits.dense.prefetch(positions)
    maps = (
        pool.query.rank_maps() if pool.query else ({}, {}, {}),
        pool.objective.rank_maps() if pool.objective else ({}, {}, {}),
    )
    return tuple(
        _envelope_record(c, pool, routed.get(c.uid), c.uid in local)
        if c.uid in envelope and c.pool_rank == 0
        else _record(c, pool, maps)
        for c in candidates
    )


def _envelope_record(c: Working, pool: Pool, route_code: str | None, local: bool) -> CandidateRecord:
    """A routed unit's record: its route code when admitted, OMIT_BUDGET when it did not fit."""
    admitted = c.reason is not ReasonCode.BUDGET_EXHAUSTED
    if admitted:
        reason = LocalCode.LOCAL_ADDED.value if local else (route_code or RouteCode.ROUTE_EXPLICIT.value)
    else:
        reason = RouteCode.OMIT_BUDGET.value
    bm25 = float(pool.query.bm25[c.pos]) if pool.query is not None and c.pos >= 0 else 0.0
    return CandidateRecord(
        unit_id=c.uid,
        project=c.unit.project,
        evidence_class=c.unit.evidence_class,
        unit_tokens=c.unit.tokens,
        retrieval=RetrievalRecord(
            sources=("local" if local else "routing",),
            pool_rank=0,
            retrieval_rank=0,
            query_score=0.0,
            fused_score=None,
            fused_rank=None,
            bm25_score=bm25,
            bm25_rank=None,
            dense_score=None,
            dense_rank=None,
            pulled_by="routing",
        ),
        signals=Signals(**{name: float(c.signals[name]) for name in SIGNAL_NAMES}),
        eligibility=(),
        eligible=True,
        bucket=0,
        rank_score=0.0,
        rank=c.rank,
        stage=Stage.ROUTING.value if admitted else Stage.BUDGET.value,
        reason_code=reason,
        disposition=(Disposition.ADMITTED if admitted else Disposition.BUDGET_OMITTED).value,
        budget=BudgetState(spent=c.budget[0], remaining=c.budget[1]),
        item_id=c.item_id,
    )


def _record(c: Working, pool: Pool, maps) -> CandidateRecord:
    (q_lex, q_dense, q_fused), (o_lex, o_dense, o_fused) = maps
    sources = []
    if c.pos in q_lex:
        sources.append("bm25")
    if c.pos in q_dense:
        sources.append("dense")
    if c.pos in o_lex:
        sources.append("objective_bm25")
    if c.pos in o_dense:
        sources.append("objective_dense")
    pulled = pool.pulled_by.get(c.pos)
    if pulled:
        sources.append(pulled.split(":", 1)[0])
    bm25_score, bm25_rank = _hit(pool.query, q_lex, c.pos, False)
    dense_score, dense_rank = _hit(pool.query, q_dense, c.pos, True)
    obm25_score, obm25_rank = _hit(pool.objective, o_lex, c.pos, False)
    odense_score, odense_rank = _hit(pool.objective, o_dense, c.pos, True)
    fused = pool.fused.get(c.pos)
    retrieval = RetrievalRecord(
        sources=tuple(sources),
        pool_rank=c.pool_rank,
        retrieval_rank=c.retrieval_rank,
        query_score=round(c.query_score, 6),
        fused_score=fused[0] if fused else None,
        fused_rank=fused[1] if fused else None,
        bm25_score=bm25_score if bm25_score is not None else 0.0,
        bm25_rank=bm25_rank,
        dense_score=dense_score,
        dense_rank=dense_rank,
        objective_bm25_score=obm25_score,
        objective_bm25_rank=obm25_rank,
        objective_dense_score=odense_score,
        objective_dense_rank=odense_rank,
        query_fused_rank=q_fused.get(c.pos),
        objective_fused_rank=o_fused.get(c.pos),
        pulled_by=pulled,
    )
    reason = c.reason
    assert reason is not None, f"{c.uid} left the pipeline without a decision"
    return CandidateRecord(
        unit_id=c.uid,
        project=c.unit.project,
        evidence_class=c.unit.evidence_class,
        unit_tokens=c.unit.tokens,
        retrieval=retrieval,
        signals=Signals(**{name: float(c.signals[name]) for name in SIGNAL_NAMES}),
        eligibility=tuple(c.checks),
        eligible=c.eligible,
        bucket=c.bucket,
        rank_score=c.rank_score,
        rank=c.rank,
        stage=c.stage,
        reason_code=reason.value,
        disposition=REASON_DISPOSITION[reason].value,
        budget=BudgetState(spent=c.budget[0], remaining=c.budget[1]),
        item_id=c.item_id,
        redundancy_with_admitted=c.redundancy_admitted,
        noted_on=c.noted_on,
        contributions=c.contributions if c.eligible else (),
        stop_note=c.stop_note,
    )


def retriever_config(
    index: CorpusIndex, request: SelectionRequest, pool: Pool, config: EngineConfig
) -> RetrieverConfig:
    dense_used = index.dense is not None and request.query_vector is not None
    return RetrieverConfig(
        tokeniser=TOKENISER,
        bm25=index.bm25.describe(),
        dense=index.dense.name if dense_used else "none",
        dense_dimension=index.dense.dimension if dense_used else None,
        fusion=f"rrf(k={config.rrf_k})"
        if dense_used
        else f"bm25-only(1/(k+rank), k={config.rrf_k})",
        corpus_size=len(index),
        corpus_digest=index.digest,
    )
