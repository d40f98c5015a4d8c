"""Trace records: how each candidate entered the pool, what it was scored, how it was decided,
frozen into CandidateRecords (and the retriever's configuration) once select() has decided."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from .index import TOKENISER, CorpusIndex
from .outputs import (
    SIGNAL_NAMES,
    BudgetState,
    CandidateRecord,
    Effect,
    RetrievalRecord,
    RetrieverConfig,
    Signals,
)
from .policy import Working
from .reason_codes import REASON_DISPOSITION, Disposition, ReasonCode, Stage
from .retrieval import Pool
from .routing.codes import LocalCode, RouteCode
from .routing.types import RoutingReport
from .search import QueryHits, cosines
from .types import EngineConfig, SelectionRequest

T = TypeVar("T")
# each reason's code and disposition as the records write them (enum .value reads cost per record)
_REASON_TEXT = {reason: (reason.value, REASON_DISPOSITION[reason].value) for reason in REASON_DISPOSITION}


def frozen(cls: type[T], values: dict) -> T:
    """`cls(**values)` for a frozen dataclass, `values` naming every field: the same object (equal,
    the same attributes), without the generated __init__ setting each field through
    object.__setattr__, which made building a trace's records cost more than deciding them.
    """
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


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


def records(
    candidates: Sequence[Working], pool: Pool, routing: RoutingReport | None = None
) -> tuple[CandidateRecord, ...]:
    routed = {d.unit: d.reason for d in routing.dispositions} if routing else {}
    local = {d.unit for d in routing.local} if routing else set()
    envelope = frozenset(routing.envelope) if routing else frozenset()
    positions = [c.pos for c in candidates if c.pos >= 0]
    # every raw score the records show, gathered once for the whole pool
    columns = (_Columns(pool.query, positions), _Columns(pool.objective, positions))
    return tuple(
        _envelope_record(c, pool, routed.get(c.uid), c.uid in local)
        if c.uid in envelope and c.pool_rank == 0
        else _record(c, pool, columns)
        for c in candidates
    )


class _Columns:
    """One text's hits as the records read them: lexical, dense and fused rank maps, and the BM25
    score and cosine of every pooled position (None where the search did not run)."""

    __slots__ = ("lexical", "dense", "fused", "bm25", "cosine")

    def __init__(self, hits: QueryHits | None, positions: list[int]):
        if hits is None:
            self.lexical = self.dense = self.fused = {}
            self.bm25 = self.cosine = None
            return
        self.lexical, self.dense, self.fused = hits.rank_maps()
        self.bm25 = dict(zip(positions, hits.bm25_scores(positions), strict=True))
        if hits.dense is None:
            self.cosine = None
        else:
            self.cosine = dict(zip(positions, cosines(hits.dense, positions), strict=True))


def _signals(c: Working) -> Signals:
    values = map(float, map(c.signals.__getitem__, SIGNAL_NAMES))
    return frozen(Signals, dict(zip(SIGNAL_NAMES, values, strict=True)))


def _envelope_record(c: Working, pool: Pool, route_code: str | None, local: bool) -> CandidateRecord:
    """A routed unit's record: its route code when admitted, OMIT_BUDGET when it did not fit."""
    admitted = c.reason is not ReasonCode.BUDGET_EXHAUSTED
    if admitted:
        reason = LocalCode.LOCAL_ADDED.value if local else (route_code or RouteCode.ROUTE_EXPLICIT.value)
    else:
        reason = RouteCode.OMIT_BUDGET.value
    bm25 = pool.query.bm25_scores([c.pos])[0] if pool.query is not None and c.pos >= 0 else 0.0
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
        signals=_signals(c),
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


def _record(c: Working, pool: Pool, columns: tuple[_Columns, _Columns]) -> CandidateRecord:
    q, o = columns
    pos = c.pos
    sources = []
    if pos in q.lexical:
        sources.append("bm25")
    if pos in q.dense:
        sources.append("dense")
    if pos in o.lexical:
        sources.append("objective_bm25")
    if pos in o.dense:
        sources.append("objective_dense")
    pulled = pool.pulled_by.get(pos)
    if pulled:
        sources.append(pulled.split(":", 1)[0])
    fused = pool.fused.get(pos)
    retrieval = frozen(
        RetrievalRecord,
        {
            "sources": tuple(sources),
            "pool_rank": c.pool_rank,
            "retrieval_rank": c.retrieval_rank,
            "query_score": round(c.query_score, 6),
            "fused_score": fused[0] if fused else None,
            "fused_rank": fused[1] if fused else None,
            "bm25_score": q.bm25[pos] if q.bm25 is not None else 0.0,
            "bm25_rank": q.lexical.get(pos),
            "dense_score": q.cosine[pos] if q.cosine is not None else None,
            "dense_rank": q.dense.get(pos),
            "objective_bm25_score": o.bm25[pos] if o.bm25 is not None else None,
            "objective_bm25_rank": o.lexical.get(pos),
            "objective_dense_score": o.cosine[pos] if o.cosine is not None else None,
            "objective_dense_rank": o.dense.get(pos),
            "query_fused_rank": q.fused.get(pos),
            "objective_fused_rank": o.fused.get(pos),
            "pulled_by": pulled,
        },
    )
    reason = c.reason
    assert reason is not None, f"{c.uid} left the pipeline without a decision"
    reason_code, disposition = _REASON_TEXT[reason]
    unit = c.unit
    return frozen(
        CandidateRecord,
        {
            "unit_id": unit.id,
            "project": unit.project,
            "evidence_class": unit.evidence_class,
            "unit_tokens": unit.tokens,
            "retrieval": retrieval,
            "signals": _signals(c),
            "eligibility": tuple(c.checks),
            "eligible": c.eligible,
            "bucket": c.bucket,
            "rank_score": c.rank_score,
            "rank": c.rank,
            "stage": c.stage,
            "reason_code": reason_code,
            "disposition": disposition,
            "budget": frozen(BudgetState, {"spent": c.budget[0], "remaining": c.budget[1]}),
            "item_id": c.item_id,
            "redundancy_with_admitted": c.redundancy_admitted,
            "noted_on": c.noted_on,
            "contributions": c.contributions if c.eligible else (),
            "stop_note": c.stop_note,
        },
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
