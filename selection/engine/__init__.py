"""The selection engine: pure Python, no Django import anywhere below this package."""

from .attribution import Attribution, FailureCode, attribute
from .conditions import (
    CONDITIONS,
    LADDER,
    Condition,
    UnknownCondition,
    effective_condition,
    get_condition,
)
from .index import CorpusIndex, DenseHits, DenseSearcher, IvfSearcher, NumpyExactSearcher, tokenise
from .outputs import BundleItem, CandidateRecord, ContextBundle, ContextTrace, SelectionResult
from .pipeline import ENGINE_VERSION, POLICY_VERSION, select
from .reason_codes import Disposition, ReasonCode, Stage
from .timings import StageTimings, TimedStage
from .types import EngineConfig, ProjectFrame, SelectionRequest, Unit, WorkFrame, WorkSignal

__all__ = [
    "Attribution",
    "BundleItem",
    "CONDITIONS",
    "CandidateRecord",
    "Condition",
    "ContextBundle",
    "ContextTrace",
    "CorpusIndex",
    "DenseHits",
    "DenseSearcher",
    "Disposition",
    "ENGINE_VERSION",
    "EngineConfig",
    "FailureCode",
    "IvfSearcher",
    "LADDER",
    "NumpyExactSearcher",
    "POLICY_VERSION",
    "ProjectFrame",
    "ReasonCode",
    "SelectionRequest",
    "SelectionResult",
    "Stage",
    "StageTimings",
    "TimedStage",
    "Unit",
    "UnknownCondition",
    "WorkFrame",
    "WorkSignal",
    "attribute",
    "effective_condition",
    "get_condition",
    "select",
    "tokenise",
]
