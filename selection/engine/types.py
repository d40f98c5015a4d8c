"""Frozen inputs to the engine: units, frames and their policies, the request, the engine's
configuration; no Django import below selection/engine (the outputs: outputs.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from .gates import Gates
from .routing.types import RoutingInputs, RoutingPolicy
from .serialisation import Serialisable

ESTABLISHMENTS = ("declared", "inferred-confident", "inferred-ambiguous", "unknown")
SIGNAL_KINDS = (
    "user_message",
    "project_state",
    "tool_result",
    "failing_test",
    "scheduled_job",
    "event",
    "agent_task",
)
LEDGER_LABELS = ("MUST", "SHOULD", "OPTIONAL", "DISTRACTOR", "HARMFUL")


def estimate_tokens(text: str) -> int:
    """The corpus format's token estimate: ceil(len(text) / 4)."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class OpenLoop(Serialisable):
    status: str  # "open" | "closed"
    kind: str  # "todo" | "question" | "expectation"


@dataclass(frozen=True)
class Unit(Serialisable):
    """A memory unit as the engine sees it. It never carries an importance."""

    id: str
    project: str
    evidence_class: str
    text: str
    title: str = ""
    created_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    supersedes: tuple[str, ...] = ()
    echo_of: str | None = None
    supports: tuple[str, ...] = ()
    refutes: tuple[str, ...] = ()
    open_loop: OpenLoop | None = None
    paths: tuple[str, ...] = ()
    subject: str | None = None
    facet: str | None = None
    root: bool = False

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)

    @property
    def is_open_loop(self) -> bool:
        """An open loop: its open_loop record says open, or (without one) its class is open_loop."""
        if self.open_loop is not None:
            return self.open_loop.status == "open"
        return self.evidence_class == "open_loop"


@dataclass(frozen=True)
class WorkTypeProfile(Serialisable):
    """What a work type says about itself (corpus format 1.1 long form), for frame builders."""

    name: str
    description: str = ""
    cues: tuple[str, ...] = ()  # words or phrases that signal this work type


@dataclass(frozen=True)
class BuilderThresholds(Serialisable):
    """When a builder's scores establish a frame: first below `min_score` is unknown; first minus
    second below `margin` is inferred-ambiguous; otherwise inferred-confident."""

    builder: str
    margin: float
    min_score: float


DEFAULT_THRESHOLDS: tuple[BuilderThresholds, ...] = (
    BuilderThresholds("cue", margin=1.0, min_score=1.0),
    BuilderThresholds("model", margin=0.2, min_score=0.5),
    BuilderThresholds("similarity", margin=0.05, min_score=0.25),
)
AMBIGUOUS_BEHAVIOURS = ("merge", "soft", "query")
UNKNOWN_BEHAVIOURS = ("query",)
CALIBRATIONS = ("loo", "none")


@dataclass(frozen=True)
class EstablishmentPolicy(Serialisable):
    """Frame policy for establishing the work frame: which builder runs when the caller declares
    no work type, when its scores count as confident, and how conditioning weakens when they do not.

    ambiguous: merge (scope kept, preference widened to the plausible work types' merged order),
    soft (the frame widens recall but neither excludes nor reorders), query (scoped query-only).
    unknown: query (scoped query-only).

    calibration "loo": a builder that reads the project's declared past tasks (similarity) is
    confident only above the largest margin at which it misread one of them, each read
    leave-one-out (never with itself, never with the task being judged as neighbour or case),
    and only once it has read at least `min_calibrated` of them; below that it is ambiguous at
    best. "none": the thresholds alone decide.
    query_head: the share of the budget an inferred (not declared) frame keeps for the head of
    the scoped query-only ranking, admissible whatever its class and ranked ahead of the class
    buckets, so that a misread work type cannot crowd out what the query alone finds first.
    0 switches the hedge off.
    """

    builder: str = "declared"
    ambiguous: str = "merge"
    unknown: str = "query"
    thresholds: tuple[BuilderThresholds, ...] = DEFAULT_THRESHOLDS
    calibration: str = "loo"
    min_calibrated: int = 3
    query_head: float = 0.25

    def thresholds_for(self, builder: str) -> BuilderThresholds:
        for item in self.thresholds:
            if item.builder == builder:
                return item
        for item in DEFAULT_THRESHOLDS:
            if item.builder == builder:
                return item
        return BuilderThresholds(builder, margin=0.0, min_score=0.0)


ADMISSION_RULES = ("none", "relative", "unlisted")
# Bundle order (frame policy): the routed envelope (root constraints, then the other routed
# units, in routing order) is always first, a prefix that does not depend on the query; then the
# ranked evidence by class bucket, inside a bucket by rank ("rank") or by unit id ("stable": the
# same admitted units render in the same order whatever the query, so consecutive selections share
# a longer prefix)
ORDER_RULES = ("rank", "stable")


@dataclass(frozen=True)
class AdmissionPolicy(Serialisable):
    """Frame policy for when a C6 bundle stops before the budget (the budget stays a ceiling).

    rule "relative": inside a class bucket, an item whose evidence is below `floor` x the best
    evidence admitted in that bucket is stopped, and so is every item of the unlisted-class bucket
    after its first `unlisted` admitted ones. An item's evidence is the strongest of its query
    relevance, objective relevance (each text's own fused list) and retrieval score (all a pulled
    unit has). Never stopped: routed units, and the first unit the class pull brought in for a
    class (the frame's guarantee of that class). floor 0.6 and unlisted 2 were set on
    fixtures/context-lab, whose frames declare them (docs/results.md).

    tier_cap (under "relative"; None: no cap): a listed class's bucket shrinks with its place in the
    work type's preference order: the bucket of tier t (0 = most preferred) admits at most
    ceil(tier_cap / (t + 1)) items, so the preferred class keeps its room and the classes the work
    type ranks further down contribute their strongest one or two. The unlisted bucket keeps its
    own `unlisted` cap. 5 was set on fixtures/context-lab (docs/results.md, "Where precision stops").

    unlisted_floor (under "relative"; None: no floor): an item of the unlisted bucket (a class the
    work type does not ask for, eligible on query support alone) is stopped unless both the query
    and the objective rank it high: min(query relevance, objective relevance) >= unlisted_floor
    (the query relevance alone when no objective query ran). 0.75 was set on fixtures/context-lab.

    rule "unlisted": the unlisted floor alone (`unlisted_floor`, DEFAULT_UNLISTED_FLOOR when not
    given); nothing else stops. It is the engine's default for a frame that declares no
    `admission` (DEFAULT_ADMISSION, `origin` "engine default", which every stop note names): set
    on fixtures/context-lab (docs/results.md), where it keeps recall, and it
    keeps recall on the book corpus it was never tuned to. rule "none": the budget alone ends the
    bundle (a frame declares `admission: {rule: none}` to keep the book's behaviour).
    """

    rule: str = "none"
    floor: float = 0.6
    unlisted: int = 2
    tier_cap: int | None = None
    unlisted_floor: float | None = None
    origin: str = "frame"  # "frame": declared by the frame; "engine default": DEFAULT_ADMISSION


DEFAULT_UNLISTED_FLOOR = 0.75
# what a frame that declares no `admission` gets (a product default set on fixtures/context-lab)
DEFAULT_ADMISSION = AdmissionPolicy(
    rule="unlisted", unlisted_floor=DEFAULT_UNLISTED_FLOOR, origin="engine default"
)


@dataclass(frozen=True)
class ProjectFrame(Serialisable):
    """Durable, versioned project policy written by a person (configuration)."""

    project: str
    version: int
    purpose: str = ""
    objectives: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    default_classes: tuple[str, ...] = ()
    class_pull: int = 3
    # ordered preference over evidence classes, per work type; kept as sorted pairs so the
    # frame is hashable and its iteration order never depends on dict insertion
    work_types: tuple[tuple[str, tuple[str, ...]], ...] = ()
    open_loop_work_types: tuple[str, ...] = ()
    gates: Gates = field(default_factory=Gates)
    # descriptions and cues of the work types written in the long form, sorted by name
    work_type_profiles: tuple[WorkTypeProfile, ...] = ()
    establishment: EstablishmentPolicy = field(default_factory=EstablishmentPolicy)
    # task categories -> work types, and which modules each loads (docs/corpus-format.md)
    routing: RoutingPolicy = field(default_factory=RoutingPolicy)
    # when a C6 bundle stops before the budget (docs/engine.md, Budget)
    # (DEFAULT_ADMISSION when the frame declares none)
    admission: AdmissionPolicy = DEFAULT_ADMISSION
    # the order of the rendered bundle (ORDER_RULES); membership never depends on it
    bundle_order: str = "rank"

    def classes_for(self, work_type: str | None) -> tuple[str, ...]:
        for name, classes in self.work_types:
            if name == work_type:
                return classes
        return ()

    def lists(self, work_type: str | None) -> bool:
        return any(name == work_type for name, _ in self.work_types)

    @property
    def work_type_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.work_types)

    def profile(self, work_type: str) -> WorkTypeProfile:
        for item in self.work_type_profiles:
            if item.name == work_type:
                return item
        return WorkTypeProfile(work_type)

    @property
    def scope_set(self) -> frozenset[str]:
        return frozenset(self.scope or (self.project,))


@dataclass(frozen=True)
class WorkSignal(Serialisable):
    id: str
    kind: str
    content: str


@dataclass(frozen=True)
class WorkFrame(Serialisable):
    """What is being done now (observation); each field cites the signals that licensed it."""

    objective: str = ""
    work_type: str | None = None
    constraints: tuple[str, ...] = ()
    signals: tuple[WorkSignal, ...] = ()
    standpoint: datetime | None = None
    establishment: str = "declared"
    # field name -> ids of the signals that licensed it; a field absent here is a guess
    cites: tuple[tuple[str, tuple[str, ...]], ...] = ()
    builder: str = "declared"  # the frame builder that produced this frame
    margin: float | None = None  # the builder's score of the first work type minus the second's
    runner_up: str | None = None  # the builder's second work type
    # ambiguous frames: the work types close enough to the first to be plausible, best first
    plausible_work_types: tuple[str, ...] = ()
    objective_by: str = "declared"  # "declared", or the builder that wrote the objective itself
    scores: tuple[tuple[str, float], ...] = ()  # the builder's score per work type, best first
    # the margin the builder needed to be confident (its threshold, raised by calibration), and
    # how that bar was found ("" for declared frames and uncalibrated builders)
    confidence_bar: float | None = None
    calibration: str = ""

    def cited(self, field_name: str) -> tuple[str, ...]:
        for name, ids in self.cites:
            if name == field_name:
                return ids
        return ()


@dataclass(frozen=True)
class SelectionRequest(Serialisable):
    project_frame: ProjectFrame
    work_frame: WorkFrame
    query: str
    budget_tokens: int
    condition: str = "C6"
    standpoint: datetime | None = None  # falls back to work_frame.standpoint
    # dense vectors of the query and of the objective, computed outside the engine
    query_vector: tuple[float, ...] | None = None
    objective_vector: tuple[float, ...] | None = None
    # the hidden ledger: read only by the oracle (CO) and by attribution, never by C0..C6
    ledger: Mapping[str, str] | None = None
    # declared routing inputs (task category, path scope, overlays, strict, no_local)
    routing: RoutingInputs = field(default_factory=RoutingInputs)
    # the requesting user's private units (local overlay); empty under no_local
    local_units: tuple[Unit, ...] = ()


# --------------------------------------------------------------------------------------------
# Engine configuration: every tunable the policy reads, recorded in each trace.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineConfig:
    """Policy constants. The defaults are the book's (pool 40, RRF k=60, class-absent rank 10)."""

    pool_size: int = 40
    lexical_k: int = 60  # BM25 hits fed into fusion per query
    dense_k: int = 60  # dense hits fed into fusion per query
    rrf_k: int = 60
    recency_additions: int = 8  # C1: the most recent units added to the pool
    recency_added_score: float = 0.05
    class_pull_floor: float = 0.5  # pulled units score min(pool score) * this
    class_absent_query_rank: int = (
        10  # a class-absent unit stays eligible at retrieval rank <= this
    )
    redundancy_threshold: float = 0.6  # C6: Jaccard above this against an admitted item rejects
    adjacency_weight: float = 0.05  # C6: added to the rank score per unit of adjacency
    open_loop_weight: float = 0.15  # C5+: added to the rank score per unit of open-loop relevance
    neighbour_pull_top: int = 10  # C5+: support/refute neighbours of this many strongest hits
    neighbour_pull_weight: float = 0.5  # C5+: a neighbour scores its strong candidate's x this
    open_loop_pull: int = 3  # C5+: open loops pulled when the work type uses unfinished work
    # C2+: BM25 (with the scope's own statistics) and dense search rank only in-scope units, so
    # out-of-scope hits never take a place in the pool (off: they take their places and eligibility
    # rules them out). Left off: on, context-lab's C6 recall holds but its precision falls (0.576
    # -> 0.570) and the book's C6 recall falls (0.902 -> 0.879), the freed places going to in-scope
    # units that take the budget from required ones (docs/results.md, "Where precision stops")
    scope_at_retrieval: bool = False
    # a scoped search's lexical and dense lists are cut at the pool size before they are fused
    # (retrieval._scoped_depth): a scope has no other projects to take the lists' extra depth
    scope_depth_pool: bool = True
    # the pool widens while its tail still scores near its head (widening.py): by
    # pool_widen_step places while the last in-scope retrieved unit's relevance is at least
    # pool_widen_tail x the head's, up to pool_widen_max (= pool_size: never widens)
    pool_widen_tail: float = 0.55
    pool_widen_step: int = 10
    pool_widen_max: int = 60
    abstention: bool = True  # weaken conditioning for ambiguous/unknown work frames
    # class preference among supported candidates: a retrieved candidate of a listed
    # class whose evidence (policy.evidence: the strongest of query relevance, objective relevance
    # and retrieval score) is below this fraction of the best evidence in the eligible pool leaves
    # its class bucket for the weak bucket, ranked after every class bucket (the unlisted one
    # included). Pulled units (class pull, successor, recency) keep their bucket. None: off
    weak_support_fraction: float | None = None
