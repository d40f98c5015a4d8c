"""Counterfactuals: the smallest single change that would have admitted a unit, each one found by
re-running the engine with the stored inputs and one modified setting. Nothing is estimated.

Pure Python; the caller supplies the index and the dense vectors the original run used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .conditions import effective_condition, get_condition
from .index import CorpusIndex
from .outputs import ContextTrace, SelectionResult
from .pipeline import select
from .reason_codes import REACHES_MODEL, Disposition
from .types import ProjectFrame, SelectionRequest

MAX_PULL = 10  # the largest class pull tried
BUDGET_FACTOR = 1.0  # budgets are searched up to +100%


@dataclass(frozen=True)
class Probe:
    """One engine run: the setting tried and what happened to the unit."""

    value: int
    disposition: str | None  # None: not a candidate
    reason_code: str | None


@dataclass(frozen=True)
class Counterfactual:
    kind: str  # budget | class_rank | class_pull
    title: str
    applicable: bool
    found: bool
    value: int | None  # N tokens added / k places up / the new pull
    setting: str  # the changed setting in words
    outcome: Probe | None  # the unit at the found value
    below: Probe | None  # the unit one step smaller (proof of minimality), None when value is 1
    gained: tuple[str, ...] = ()  # units admitted by the change that the original run left out
    lost: tuple[str, ...] = ()  # units the change pushed out
    runs: int = 0
    note: str = ""


@dataclass(frozen=True)
class CounterfactualReport:
    unit_id: str
    baseline: Probe  # the unit in a re-run with no change (should equal the stored trace)
    reproduces: bool  # the re-run's digest equals the stored one
    options: tuple[Counterfactual, ...]

    @property
    def smallest(self) -> tuple[Counterfactual, ...]:
        return tuple(o for o in self.options if o.found)


def _inapplicable(kind: str, title: str, *, note: str) -> Counterfactual:
    """A change that cannot apply to this trace (no class preference, already first, ...)."""
    return Counterfactual(kind, title, False, False, None, "", None, None, note=note)


def _not_found(kind: str, title: str, setting: str, outcome: Probe | None, runs: int, *, note: str) -> Counterfactual:
    """A change searched to its bound without admitting the unit."""
    return Counterfactual(kind, title, True, False, None, setting, outcome, None, runs=runs, note=note)


class _Runner:
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

    def probe(self, value: int, result: SelectionResult) -> Probe:
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


def _search_linear(runner: _Runner, values, make: Callable[[int], SelectionRequest], previous: Probe):
    """First value (in order) that admits the unit: (value, probe, result, previous probe)."""
    for value in values:
        result = runner.run(make(value))
        probe = runner.probe(value, result)
        if runner.admitted(probe):
            return value, probe, result, previous
        previous = probe
    return None, previous, None, None


def _budget(runner: _Runner, factor: float) -> Counterfactual:
    budget = runner.request.budget_tokens
    top = max(int(budget * factor), 1)

    def make(extra: int) -> SelectionRequest:
        return replace(runner.request, budget_tokens=budget + extra)

    def at(extra: int) -> tuple[Probe, SelectionResult]:
        result = runner.run(make(extra))
        return runner.probe(extra, result), result

    high, high_result = at(top)
    title = "A larger budget"
    if not runner.admitted(high):
        return _not_found(
            "budget",
            title,
            f"up to {budget + top} tokens (+{top})",
            high,
            runner.runs,
            note=f"still {high.disposition or 'not a candidate'} at +{top} tokens "
            f"({high.reason_code or 'never surfaced'})",
        )
    # invariant: lo fails, hi admits; ends with hi = lo + 1, so hi - 1 is shown to fail
    lo, hi = 0, top
    lo_probe = runner.probe(0, runner.base)
    hi_probe, hi_result = high, high_result
    while hi - lo > 1:
        mid = (lo + hi) // 2
        probe, result = at(mid)
        if runner.admitted(probe):
            hi, hi_probe, hi_result = mid, probe, result
        else:
            lo, lo_probe = mid, probe
    gained, lost = runner.effects(hi_result)
    return Counterfactual(
        "budget",
        title,
        True,
        True,
        hi,
        f"budget {budget + hi} tokens (+{hi})",
        hi_probe,
        lo_probe,
        gained,
        lost,
        runner.runs,
    )


def _ranking_list(trace: ContextTrace) -> tuple[str, str | None]:
    """Which preference list the condition ranks by: ("work_type", name) or ("default", None)."""
    named = get_condition(trace.condition)
    condition, _ = effective_condition(
        named,
        trace.work_frame.establishment,
        enabled=trace.config.abstention,
        policy=trace.project_frame.establishment,
    )
    # a merged order is built from several lists: no single list to move a class in
    if condition.oracle or condition.class_policy in ("none", "merged"):
        return "none", None
    work_type = trace.work_frame.work_type
    if condition.class_policy == "work_type" and trace.project_frame.classes_for(work_type):
        return "work_type", work_type
    return "default", None


def _with_classes(frame: ProjectFrame, which: str, work_type, classes) -> ProjectFrame:
    if which == "default":
        return replace(frame, default_classes=tuple(classes))
    work_types = tuple((name, tuple(classes) if name == work_type else listed) for name, listed in frame.work_types)
    return replace(frame, work_types=work_types)


def _class_rank(runner: _Runner, trace: ContextTrace, evidence_class: str) -> Counterfactual:
    which, work_type = _ranking_list(trace)
    frame = trace.project_frame
    title = f"Class {evidence_class} moved up"
    if which == "none":
        return _inapplicable(
            "class_rank",
            title,
            note=f"{trace.effective_condition} ranks without a class preference",
        )
    current = list(frame.default_classes if which == "default" else frame.classes_for(work_type))
    listed = evidence_class in current
    start = current.index(evidence_class) if listed else len(current)
    where = f"the {work_type} list" if which == "work_type" else "default_classes"

    def classes_for(k: int) -> list[str]:
        out = [c for c in current if c != evidence_class]
        out.insert(start - k + (0 if listed else 1), evidence_class)
        return out

    def make(k: int) -> SelectionRequest:
        return replace(
            runner.request,
            project_frame=_with_classes(frame, which, work_type, classes_for(k)),
        )

    steps = range(1, start + (0 if listed else 1) + 1)
    if not steps:
        return _inapplicable(
            "class_rank",
            title,
            note=f"{evidence_class} already heads {where}",
        )
    value, probe, result, previous = _search_linear(runner, steps, make, replace(runner.probe(0, runner.base), value=0))
    if value is None:
        return _not_found(
            "class_rank",
            title,
            f"up to {len(steps)} places in {where}",
            probe,
            runner.runs,
            note=f"not admitted even at the head of {where}",
        )
    gained, lost = runner.effects(result)
    order = classes_for(value)
    return Counterfactual(
        "class_rank",
        title,
        True,
        True,
        value,
        f"{evidence_class} {value} place{'s' if value != 1 else ''} up in {where}: {', '.join(order)}",
        probe,
        previous,
        gained,
        lost,
        runner.runs,
    )


def _class_pull(runner: _Runner, trace: ContextTrace, max_pull: int) -> Counterfactual:
    named = get_condition(trace.condition)
    condition, _ = effective_condition(
        named,
        trace.work_frame.establishment,
        enabled=trace.config.abstention,
        policy=trace.project_frame.establishment,
    )
    frame = trace.project_frame
    title = "A larger class pull"
    if not condition.class_pull:
        return _inapplicable(
            "class_pull",
            title,
            note=f"{trace.effective_condition} pulls no classes",
        )
    values = range(frame.class_pull + 1, max_pull + 1)
    if not values:
        return _inapplicable(
            "class_pull",
            title,
            note=f"class pull {frame.class_pull} is already at the bound {max_pull}",
        )

    def make(pull: int) -> SelectionRequest:
        return replace(runner.request, project_frame=replace(frame, class_pull=pull))

    value, probe, result, previous = _search_linear(
        runner, values, make, replace(runner.probe(0, runner.base), value=frame.class_pull)
    )
    if value is None:
        return _not_found(
            "class_pull",
            title,
            f"pull up to {max_pull}",
            probe,
            runner.runs,
            note=f"not admitted with a class pull of {max_pull}",
        )
    gained, lost = runner.effects(result)
    return Counterfactual(
        "class_pull",
        title,
        True,
        True,
        value,
        f"class pull {value} (was {frame.class_pull})",
        probe,
        previous,
        gained,
        lost,
        runner.runs,
    )


def counterfactuals(
    trace: ContextTrace,
    unit_id: str,
    index: CorpusIndex,
    request: SelectionRequest,
    *,
    max_pull: int = MAX_PULL,
    budget_factor: float = BUDGET_FACTOR,
) -> CounterfactualReport:
    """The smallest budget increase, class move and class pull that admit `unit_id`, each by a
    bounded search of engine re-runs. `request` is the request the trace was made from
    (selection.traces.selectors.stored_request builds it through the one request builder).
    """
    unit = index.unit(unit_id)
    runner = _Runner(request, index, trace, unit_id)
    baseline = runner.probe(0, runner.base)
    reproduces = runner.base.trace.bundle_digest == trace.bundle_digest
    if runner.admitted(baseline):
        return CounterfactualReport(unit_id, baseline, reproduces, ())
    options = []
    for search in (
        lambda: _budget(runner, budget_factor),
        lambda: (
            _class_rank(runner, trace, unit.evidence_class)
            if unit is not None
            else Counterfactual(
                "class_rank", "Class moved up", False, False, None, "", None, None, note="the unit is not in the corpus"
            )
        ),
        lambda: _class_pull(runner, trace, max_pull),
    ):
        before = runner.runs
        option = search()
        options.append(replace(option, runs=runner.runs - before))
    return CounterfactualReport(unit_id, baseline, reproduces, tuple(options))
