"""Frozen outputs of the engine: candidate records, the bundle, the trace; as_dict()/from_dict()
round-trip exactly."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum

from .reason_codes import REACHES_MODEL, Disposition
from .routing.types import RoutingReport
from .serialisation import Serialisable
from .types import EngineConfig, ProjectFrame, WorkFrame

DISPOSITIONS = tuple(d.value for d in Disposition)


@dataclass(frozen=True)
class RetrieverConfig(Serialisable):
    """What produced the candidates: recorded so a replay can tell bm25-only from hybrid."""

    tokeniser: str
    bm25: str
    dense: str  # searcher name, or "none" when the request carried no vector
    dense_dimension: int | None
    fusion: str
    corpus_size: int
    corpus_digest: str


@dataclass(frozen=True)
class RetrievalRecord(Serialisable):
    """How one candidate entered the pool: sources, raw scores and ranks (1-based; None = not in
    that list).
    """

    sources: tuple[str, ...]
    pool_rank: int  # position in the candidate pool, pulls included
    retrieval_rank: int  # rank by (query score desc, unit id); the class-absent rule reads this
    query_score: float  # normalised fused score in [0, 1]; pulled units get the floor
    fused_score: float | None  # final RRF score (None when pulled rather than retrieved)
    fused_rank: int | None
    bm25_score: float  # raw BM25Okapi score of the query against this unit
    bm25_rank: int | None
    dense_score: float | None  # raw cosine; None without a query vector
    dense_rank: int | None
    objective_bm25_score: float | None = None  # C4+: the objective as a second query
    objective_bm25_rank: int | None = None
    objective_dense_score: float | None = None
    objective_dense_rank: int | None = None
    query_fused_rank: int | None = None  # rank in the query's own bm25+dense fusion
    objective_fused_rank: int | None = None
    pulled_by: str | None = None  # "recency" | "class_pull:<class>" | "successor_of:<unit id>"


@dataclass(frozen=True)
class Signals(Serialisable):
    """The ten separated signals; computed for every candidate before eligibility. Never summed
    here: how each entered the rank score is the candidate's `contributions`. (Defaults let a
    trace that records no `objective_relevance` load.)
    """

    query_relevance: float = 0.0  # the query's own fused list: 1 - (rank - 1) / n, 0 if absent
    objective_relevance: float = 0.0  # the objective's own fused list (C4+), likewise
    goal_relevance: float = 0.0
    project_relevance: float = 0.0
    temporal_validity: float = 0.0
    evidence_strength: float = 0.0
    open_loop_relevance: float = 0.0
    adjacency: float = 0.0
    recency: float = 0.0
    redundancy: float = 0.0


SIGNAL_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Signals))


class Effect(StrEnum):
    """How a signal entered a candidate's rank score (Contribution.effect)."""

    FUSED = "fused"  # its share of the retrieval score (the RRF term of its own list)
    PULLED = "pulled"  # the retrieval score a pull gave the unit (signal "pull")
    MULTIPLIER = "multiplier"  # multiplied the score; value = the change it made
    ADDITIVE = "additive"  # added weight x signal
    NONE = "none"  # did not enter the rank score; the note says where it acted, if anywhere


@dataclass(frozen=True)
class Contribution(Serialisable):
    """One signal's part in a candidate's rank score; the values of a record sum to its
    rank_score (to rounding)."""

    signal: str
    effect: str  # an Effect value
    value: float
    note: str = ""


@dataclass(frozen=True)
class EligibilityCheck(Serialisable):
    rule: str  # "scope" | "supersession" | "class"
    passed: bool
    reason_code: str | None  # set when the rule rejects
    detail: str


@dataclass(frozen=True)
class BudgetState(Serialisable):
    spent: int
    remaining: int


@dataclass(frozen=True)
class CandidateRecord(Serialisable):
    """Everything the engine knew and decided about one candidate, admitted or not."""

    unit_id: str
    project: str
    evidence_class: str
    unit_tokens: int
    retrieval: RetrievalRecord
    signals: Signals
    eligibility: tuple[EligibilityCheck, ...]
    eligible: bool
    bucket: int | None  # class-preference tier (0 = most preferred; -1 = an inferred frame's
    # query-only head, its hedge); None when not ranked
    rank_score: float  # the score ordering candidates inside a bucket
    rank: int | None  # 1-based position after ranking; None when rejected before it
    stage: str  # the stage that disposed of it
    reason_code: str
    disposition: str  # one of DISPOSITIONS
    budget: BudgetState  # budget state at the moment of the decision
    item_id: str | None = (
        None  # the bundle item it is in (admitted or folded), or would have formed
    )
    redundancy_with_admitted: float | None = None  # C6: max Jaccard against admitted items
    noted_on: str | None = None  # supersession: the item carrying the note about this unit
    # how each signal entered rank_score; empty when it was never ranked (rejected, routed, oracle)
    contributions: tuple[Contribution, ...] = ()
    stop_note: str | None = None  # ADMISSION_STOPPED: the evidence and the floor it fell below


@dataclass(frozen=True)
class CoalescingOp(Serialisable):
    """One reversible coalescing step; op is a CoalescingKind value."""

    op: str
    unit_id: str
    item_id: str
    target_id: str | None = None  # the unit echoed / superseding / contradicted
    note: str = ""


@dataclass(frozen=True)
class StageSummary(Serialisable):
    stage: str
    considered: int
    kept: int
    detail: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class BundleItem(Serialisable):
    """An atomic bundle entry; `sources` are unit ids, the first the unit whose text it carries."""

    item_id: str
    sources: tuple[str, ...]
    evidence_class: str
    project: str
    text: str
    contradicts: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    rendered: str = ""
    tokens: int = 0


@dataclass(frozen=True)
class ContextBundle(Serialisable):
    items: tuple[BundleItem, ...]
    rendered: str
    tokens: int  # ceil(len(rendered) / 4)
    digest: str  # sha256 hex of `rendered`
    budget_tokens: int

    def unit_ids(self) -> tuple[str, ...]:
        """Every admitted unit, folded ones included, in bundle order."""
        return tuple(uid for item in self.items for uid in item.sources)


@dataclass(frozen=True)
class ContextTrace(Serialisable):
    """The frozen account of one selection: frames, policy, configuration and every candidate."""

    schema: str
    engine_version: str
    policy_version: str
    condition: str  # as requested
    effective_condition: str  # after the abstention hook; equals `condition` for declared frames
    condition_note: str  # why the effective condition differs, or ""
    project_frame: ProjectFrame
    work_frame: WorkFrame
    query: str
    standpoint: datetime | None
    budget_tokens: int
    config: EngineConfig
    retriever: RetrieverConfig
    candidates: tuple[CandidateRecord, ...]
    coalescing: tuple[CoalescingOp, ...]
    stages: tuple[StageSummary, ...]
    bundle_digest: str
    bundle_tokens: int
    # the class preference the run ranked by, and why that list (never a silent fallback)
    class_order: tuple[str, ...] = ()
    class_order_reason: str = ""
    # how the rendered bundle is ordered (the frame's bundle_order, spelled out)
    order_rule: str = ""
    # routing: completeness, dispositions, conflicts; None in a trace that records no routing
    routing: RoutingReport | None = None

    def candidate(self, unit_id: str) -> CandidateRecord | None:
        for record in self.candidates:
            if record.unit_id == unit_id:
                return record
        return None

    def admitted_unit_ids(self) -> tuple[str, ...]:
        return tuple(c.unit_id for c in self.candidates if c.disposition in REACHES_MODEL)


@dataclass(frozen=True)
class SelectionResult(Serialisable):
    bundle: ContextBundle
    trace: ContextTrace
