"""Explanations read off a trace, one concern a module: the loss funnel, bundle items, near misses,
digest checks and trace diffs (pure functions of stored traces and bundles, nothing re-ranked or
guessed); the glossary and a frame's settings in words; and the counterfactual's probes and levers,
which re-run the engine (selection.engine.counterfactual). No Django.
"""

from .checks import Check, check_rerun, check_stored_bundle, sha256
from .diff import SignalDelta, TraceDiff, UnitChange, trace_diff
from .funnel import (
    FUNNEL_KEYS,
    FUNNEL_STAGES,
    FunnelRow,
    FunnelStage,
    LossFunnel,
    Outcome,
    funnel_stage,
    loss_funnel,
    sum_funnels,
    trace_outcomes,
)
from .items import item_members, render_trace_item
from .near_misses import GiveWay, NearMiss, near_misses

__all__ = [
    "FUNNEL_KEYS",
    "FUNNEL_STAGES",
    "Check",
    "FunnelRow",
    "FunnelStage",
    "GiveWay",
    "LossFunnel",
    "NearMiss",
    "Outcome",
    "SignalDelta",
    "TraceDiff",
    "UnitChange",
    "check_rerun",
    "check_stored_bundle",
    "funnel_stage",
    "item_members",
    "loss_funnel",
    "near_misses",
    "render_trace_item",
    "sha256",
    "sum_funnels",
    "trace_diff",
    "trace_outcomes",
]
