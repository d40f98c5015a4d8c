"""Frozen contracts of routing: the frame's policy, the request's inputs, the report in the trace.

No import of engine/types.py here (it imports this module).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .codes import ROUTING_ENVELOPE
from .globs import RoutePathError, normalise


@dataclass(frozen=True)
class TaskCategory:
    """One canonical task category of a frame: the work type(s) it maps to and what it loads."""

    name: str
    work_types: tuple[str, ...] = ()  # more than one: AMBIGUOUS, never guessed
    load: tuple[str, ...] = ()  # required modules or unit ids (absent -> missing-required)
    load_if_present: tuple[str, ...] = ()  # optional ones (absent -> missing-optional)
    needs_scope: bool = True  # path-routed areas need a path scope or an explicit area


@dataclass(frozen=True)
class RoutingPolicy:
    """The frame's routing rules; empty for frames that declare none."""

    task_categories: tuple[TaskCategory, ...] = ()  # sorted by name
    # module name -> the unit ids it holds (a markdown module file with several entries)
    modules: tuple[tuple[str, tuple[str, ...]], ...] = ()
    explicit: tuple[str, ...] = ()  # modules or unit ids that only an explicit overlay loads
    # module name or unit id -> activation kind (codes.ACTIVATIONS): the only triggers it admits;
    # a name without one admits every trigger (an `explicit` name: only an overlay)
    activation: tuple[tuple[str, str], ...] = ()
    # what routing bounds (codes.ROUTING_MODES): "envelope" or "bounded"
    mode: str = ROUTING_ENVELOPE

    def category(self, name: str) -> TaskCategory | None:
        for category in self.task_categories:
            if category.name == name:
                return category
        return None

    @property
    def is_empty(self) -> bool:
        return not (self.task_categories or self.modules or self.explicit or self.activation)


@dataclass(frozen=True)
class RoutingInputs:
    """The declared routing inputs of one selection; every interface passes this one type.

    task_category: canonical category (mapped to a work type by the frame); paths: the path scope
    (planned, touched or inspected files; they need not exist); overlays: areas, profiles or rules
    asked for by name; strict: refuse a bundle unless COMPLETE with no conflict; no_local: leave
    out the user's local overlay units.
    """

    task_category: str | None = None
    paths: tuple[str, ...] = ()
    overlays: tuple[str, ...] = ()
    strict: bool = False
    no_local: bool = False

    def canonical(self) -> RoutingInputs:
        """Order and repetition carry no meaning: sorted, de-duplicated, backslashes normalised."""
        return replace(
            self,
            task_category=self.task_category or None,
            paths=tuple(sorted({_normal_or_raw(p) for p in self.paths})),
            overlays=tuple(sorted(set(self.overlays))),
        )

    @property
    def declared(self) -> bool:
        return bool(self.task_category or self.paths or self.overlays)


def _normal_or_raw(path: str) -> str:
    try:
        return normalise(path)
    except RoutePathError:
        return path.replace("\\", "/")  # reported as invalid by route()


@dataclass(frozen=True)
class UnitDisposition:
    unit: str  # unit id, or the module name the policy asked for when it is missing
    disposition: str  # RouteDisposition value
    reason: str  # RouteCode value
    detail: str = ""


@dataclass(frozen=True)
class Conflict:
    code: str  # ConflictCode value
    units: tuple[str, ...]  # sorted
    project: str
    subject: str
    facet: str


@dataclass(frozen=True)
class LocalDisposition:
    unit: str
    outcome: str  # LocalCode value
    detail: str = ""


@dataclass(frozen=True)
class RoutingReport:
    """What routing decided for one selection; part of the trace, its digest and its diff."""

    inputs: RoutingInputs
    completeness: str  # Completeness value
    work_type: str | None  # the task category's work type, when it maps to exactly one
    dispositions: tuple[UnitDisposition, ...]  # one per governed unit, sorted by unit
    conflicts: tuple[Conflict, ...] = ()
    problems: tuple[str, ...] = ()  # why the completeness is not COMPLETE, in words
    envelope: tuple[str, ...] = ()  # loaded units in admission order
    budget_omissions: tuple[str, ...] = ()  # loaded units whose item did not fit (OMIT_BUDGET)
    local: tuple[LocalDisposition, ...] = ()  # the user's local overlay units
    refused: bool = False  # strict routing produced no bundle
    refusal: str = ""  # why, in words; says when a person must decide
    mode: str = ROUTING_ENVELOPE  # the frame's routing policy (codes.ROUTING_MODES)
    # envelope only: units routing did not load that ranked retrieval admitted all the same
    ranked_in: tuple[str, ...] = ()

    def disposition(self, unit: str) -> UnitDisposition | None:
        for d in self.dispositions:
            if d.unit == unit:
                return d
        return None
