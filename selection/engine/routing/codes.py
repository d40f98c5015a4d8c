"""Routing's stable strings: reason codes, dispositions and completeness (docs/reason-codes.md)."""

from __future__ import annotations

from enum import StrEnum


class RouteCode(StrEnum):
    # loaded: the routing policy put the unit in the baseline envelope
    ROUTE_ALWAYS = "ROUTE_ALWAYS"
    ROUTE_TASK = "ROUTE_TASK"
    ROUTE_PATH = "ROUTE_PATH"
    ROUTE_EXPLICIT = "ROUTE_EXPLICIT"
    # skipped: evaluated and intentionally not loaded
    SKIP_TASK_MISMATCH = "SKIP_TASK_MISMATCH"
    SKIP_NO_PATH_MATCH = "SKIP_NO_PATH_MATCH"
    SKIP_NOT_REQUESTED = "SKIP_NOT_REQUESTED"
    SKIP_SCOPE_MISSING = "SKIP_SCOPE_MISSING"
    # named by the policy but absent from the corpus
    MISSING_REQUIRED = "MISSING_REQUIRED"
    MISSING_OPTIONAL = "MISSING_OPTIONAL"
    # the unit's routing metadata breaks the rules
    ROUTE_INVALID = "ROUTE_INVALID"
    # routed, but its item did not fit the budget: a budget omission, not a routing skip
    OMIT_BUDGET = "OMIT_BUDGET"


class RouteDisposition(StrEnum):
    LOADED = "loaded"
    SKIPPED = "skipped"
    MISSING_REQUIRED = "missing-required"
    MISSING_OPTIONAL = "missing-optional"
    INVALID = "invalid"


class Completeness(StrEnum):
    COMPLETE = "COMPLETE"
    INCOMPLETE = "INCOMPLETE"
    INVALID = "INVALID"
    AMBIGUOUS = "AMBIGUOUS"


class ConflictCode(StrEnum):
    # two active units of one project share subject and facet, and neither supersedes the other
    SUBJECT_FACET_CONFLICT = "SUBJECT_FACET_CONFLICT"


class LocalCode(StrEnum):
    """What happened to a private (local overlay) unit."""

    LOCAL_ADDED = "LOCAL_ADDED"
    LOCAL_OVERRIDES_SHARED = "LOCAL_OVERRIDES_SHARED"  # claims a shared root/decision's subject+facet
    LOCAL_SUPERSEDES_SHARED = "LOCAL_SUPERSEDES_SHARED"  # tries to supersede a shared unit


ROUTE_DISPOSITION: dict[RouteCode, RouteDisposition] = {
    RouteCode.ROUTE_ALWAYS: RouteDisposition.LOADED,
    RouteCode.ROUTE_TASK: RouteDisposition.LOADED,
    RouteCode.ROUTE_PATH: RouteDisposition.LOADED,
    RouteCode.ROUTE_EXPLICIT: RouteDisposition.LOADED,
    RouteCode.SKIP_TASK_MISMATCH: RouteDisposition.SKIPPED,
    RouteCode.SKIP_NO_PATH_MATCH: RouteDisposition.SKIPPED,
    RouteCode.SKIP_NOT_REQUESTED: RouteDisposition.SKIPPED,
    RouteCode.SKIP_SCOPE_MISSING: RouteDisposition.SKIPPED,
    RouteCode.MISSING_REQUIRED: RouteDisposition.MISSING_REQUIRED,
    RouteCode.MISSING_OPTIONAL: RouteDisposition.MISSING_OPTIONAL,
    RouteCode.ROUTE_INVALID: RouteDisposition.INVALID,
}

# a module's activation kind (the markdown manifest's `activation:`, the frame's `activation`) and
# the triggers it admits; a trigger it does not name is refused (ROUTE_INVALID), never obeyed
TRIGGER_TASK, TRIGGER_PATH, TRIGGER_EXPLICIT = "task", "path", "explicit"
ACTIVATION_TRIGGERS: dict[str, frozenset[str]] = {
    "task": frozenset({TRIGGER_TASK}),
    "explicit-only": frozenset({TRIGGER_EXPLICIT}),
    "task-or-explicit": frozenset({TRIGGER_TASK, TRIGGER_EXPLICIT}),
    "path": frozenset({TRIGGER_PATH}),
    "path-or-explicit": frozenset({TRIGGER_PATH, TRIGGER_EXPLICIT}),
}
ACTIVATIONS: tuple[str, ...] = tuple(ACTIVATION_TRIGGERS)

# what routing bounds (the frame's `routing:` key). "envelope": routed units first, then ranked
# retrieval fills the rest of the budget from the whole scope, skipped modules' units included.
# "bounded": a unit routing governs and did not load never enters the bundle; ranking orders and
# budgets only what routing admitted (and the units routing does not govern).
ROUTING_ENVELOPE, ROUTING_BOUNDED = "envelope", "bounded"
ROUTING_MODES: tuple[str, ...] = (ROUTING_ENVELOPE, ROUTING_BOUNDED)

# envelope admission order: root constraints first, then task, path and explicit routes
LOAD_ORDER: tuple[RouteCode, ...] = (
    RouteCode.ROUTE_ALWAYS,
    RouteCode.ROUTE_TASK,
    RouteCode.ROUTE_PATH,
    RouteCode.ROUTE_EXPLICIT,
)
