"""Counterfactuals: the smallest single change that would have admitted a unit, each one found by
re-running the engine with the stored inputs and one modified setting, for every lever the frame
has: budget, class order, class pull, each field of the stop rule, scope; and the rule and the
units (a superseded unit's successor) that decided it. Nothing is estimated.

Pure Python; the caller supplies the index and the dense vectors the original run used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .conditions import effective_condition, get_condition
from .explain.levers import decision, scope_lever, stop_rule_levers
from .explain.probes import (
    Counterfactual,
    Decision,
    Probe,
    Runner,
    Successor,
    inapplicable,
    not_found,
    search_linear,
)
from .index import CorpusIndex
from .outputs import ContextTrace, SelectionResult
from .types import ProjectFrame, SelectionRequest

__all__ = ["Counterfactual", "CounterfactualReport", "Decision", "Probe", "Successor", "counterfactuals"]

MAX_PULL = 10  # the largest class pull tried
BUDGET_FACTOR = 1.0  # budgets are searched up to +100%


@dataclass(frozen=True)
class CounterfactualReport:
    unit_id: str
    baseline: Probe  # the unit in a re-run with no change (should equal the stored trace)
    reproduces: bool  # the re-run's digest equals the stored one
    options: tuple[Counterfactual, ...]
    decided: Decision | None = None  # the rule (and units) that disposed of it; None: admitted

    @property
    def smallest(self) -> tuple[Counterfactual, ...]:
        return tuple(o for o in self.options if o.found)


def _budget(runner: Runner, factor: float) -> Counterfactual:
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
        return not_found(
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


def _class_rank(runner: Runner, trace: ContextTrace, evidence_class: str) -> Counterfactual:
    which, work_type = _ranking_list(trace)
    frame = trace.project_frame
    title = f"Class {evidence_class} moved up"
    if which == "none":
        return inapplicable(
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
        return inapplicable(
            "class_rank",
            title,
            note=f"{evidence_class} already heads {where}",
        )
    value, probe, result, previous = search_linear(runner, steps, make, replace(runner.probe(0, runner.base), value=0))
    if value is None:
        return not_found(
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


def _class_pull(runner: Runner, trace: ContextTrace, max_pull: int) -> Counterfactual:
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
        return inapplicable(
            "class_pull",
            title,
            note=f"{trace.effective_condition} pulls no classes",
        )
    values = range(frame.class_pull + 1, max_pull + 1)
    if not values:
        return inapplicable(
            "class_pull",
            title,
            note=f"class pull {frame.class_pull} is already at the bound {max_pull}",
        )

    def make(pull: int) -> SelectionRequest:
        return replace(runner.request, project_frame=replace(frame, class_pull=pull))

    value, probe, result, previous = search_linear(
        runner, values, make, replace(runner.probe(0, runner.base), value=frame.class_pull)
    )
    if value is None:
        return not_found(
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
    runner = Runner(request, index, trace, unit_id)
    baseline = runner.probe(0, runner.base)
    reproduces = runner.base.trace.bundle_digest == trace.bundle_digest
    if runner.admitted(baseline):
        return CounterfactualReport(unit_id, baseline, reproduces, (), None)
    options = []
    decided = decision(runner)
    for search in (
        lambda: [_budget(runner, budget_factor)],
        lambda: [
            _class_rank(runner, trace, unit.evidence_class)
            if unit is not None
            else Counterfactual(
                "class_rank", "Class moved up", False, False, None, "", None, None, note="the unit is not in the corpus"
            )
        ],
        lambda: [_class_pull(runner, trace, max_pull)],
        lambda: stop_rule_levers(runner, trace),
        lambda: [scope_lever(runner, trace)],
    ):
        before = runner.runs
        found = search()
        runs = runner.runs - before
        # the runs of a group of levers belong to the lever that made them
        for option in found:
            options.append(option if len(found) > 1 else replace(option, runs=runs))
    return CounterfactualReport(unit_id, baseline, reproduces, tuple(options), decided)
