"""What a counterfactual is made of: one engine run's probe of a unit, one lever's answer, and the
runner that re-runs the engine with one setting changed and reads the unit back. Pure; the
counterfactual search (selection.engine.counterfactual) and its levers build on these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..index import CorpusIndex
from ..outputs import ContextTrace, SelectionResult
from ..pipeline import select
from ..reason_codes import REACHES_MODEL, Disposition
from ..types import SelectionRequest


@dataclass(frozen=True)
class Probe:
    """One engine run: the setting tried and what happened to the unit."""

    value: int | float
    disposition: str | None  # None: not a candidate
    reason_code: str | None


@dataclass(frozen=True)
class Counterfactual:
    kind: str  # budget | class_rank | class_pull | stop_floor | stop_tier_cap | ... | scope
    title: str
    applicable: bool
    found: bool
    value: int | float | None  # N tokens added / k places up / the new pull, floor or cap
    setting: str  # the changed setting in words
    outcome: Probe | None  # the unit at the found value
    below: Probe | None  # the unit one step smaller (proof of minimality), None when value is 1
    gained: tuple[str, ...] = ()  # units admitted by the change that the original run left out
    lost: tuple[str, ...] = ()  # units the change pushed out
    runs: int = 0
    note: str = ""


@dataclass(frozen=True)
class Successor:
    """A unit that decided another's fate, and what became of it in the same run."""

    unit_id: str
    disposition: str | None  # None: not a candidate
    reason_code: str | None


@dataclass(frozen=True)
class Decision:
    """The rule that disposed of the unit in the stored run, in words, and the units it names
    (a superseded unit's successors, a redundant unit's admitted twin)."""

    rule: str  # scope | supersession | class | stop rule | redundancy | budget | retrieval
    reason_code: str | None
    detail: str
    units: tuple[Successor, ...] = ()


def inapplicable(kind: str, title: str, *, note: str) -> Counterfactual:
    """A change that cannot apply to this trace (no class preference, already first, ...)."""
    return Counterfactual(kind, title, False, False, None, "", None, None, note=note)


def not_found(kind: str, title: str, setting: str, outcome: Probe | None, runs: int, *, note: str) -> Counterfactual:
    """A change searched to its bound without admitting the unit."""
    return Counterfactual(kind, title, True, False, None, setting, outcome, None, runs=runs, note=note)


class Runner:
    """Re-runs the engine on the stored request with one change and reads `unit_id` back."""

    def __init__(self, request: SelectionRequest, index: CorpusIndex, trace: ContextTrace, unit_id):
        self.request, self.index, self.config, self.unit_id = request, index, trace.config, unit_id
        self.runs = 0
        self.base: SelectionResult = self.run(request)
        original = self.base.trace.candidate(unit_id)
        # a folded unit counts as admitted in the metrics; if it was folded, only its own item will do
        self.need_own_item = original is not None and original.disposition == Disposition.FOLDED

    def run(self, request: SelectionRequest) -> SelectionResult:
        self.runs += 1
        return select(request, self.index, self.config)

    def probe(self, value, result: SelectionResult) -> Probe:
        record = result.trace.candidate(self.unit_id)
        if record is None:
            return Probe(value, None, None)
        return Probe(value, record.disposition, record.reason_code)

    def admitted(self, probe: Probe) -> bool:
        if self.need_own_item:
            return probe.disposition == Disposition.ADMITTED
        return probe.disposition in REACHES_MODEL

    def effects(self, result: SelectionResult) -> tuple[tuple[str, ...], tuple[str, ...]]:
        before = set(self.base.trace.admitted_unit_ids())
        after = set(result.trace.admitted_unit_ids())
        return tuple(sorted(after - before - {self.unit_id})), tuple(sorted(before - after))


def search_linear(runner: Runner, values, make: Callable[..., SelectionRequest], previous: Probe):
    """First value (in order) that admits the unit: (value, probe, result, previous probe)."""
    for value in values:
        result = runner.run(make(value))
        probe = runner.probe(value, result)
        if runner.admitted(probe):
            return value, probe, result, previous
        previous = probe
    return None, previous, None, None
