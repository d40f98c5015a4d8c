"""The counterfactual levers beyond budget and class order: each field of the frame's stop rule
(floor, tier cap, unlisted cap, unlisted floor, the rule itself), the frame's scope, and the rule
and the units that decided a unit's fate in the stored run. Each answer is found by re-running the
engine (Runner); nothing is estimated. Pure.
"""

from __future__ import annotations

from dataclasses import replace

from ..conditions import effective_condition, get_condition
from ..outputs import ContextTrace
from ..reason_codes import ReasonCode
from ..types import DEFAULT_UNLISTED_FLOOR, AdmissionPolicy
from .probes import Counterfactual, Decision, Runner, Successor, inapplicable, not_found, search_linear

FLOOR_STEP = 0.05  # floors are lowered in steps of 0.05 down to 0
MAX_CAP_RAISE = 10  # caps are raised by up to 10 items


def condition_of(trace: ContextTrace):
    named = get_condition(trace.condition)
    condition, _ = effective_condition(
        named,
        trace.work_frame.establishment,
        enabled=trace.config.abstention,
        policy=trace.project_frame.establishment,
    )
    return condition


def _floors(current: float) -> list[float]:
    steps = int(round(current / FLOOR_STEP))
    return [round((steps - k) * FLOOR_STEP, 2) for k in range(1, steps + 1)]


def _policy_search(runner: Runner, kind: str, title: str, field: str, values, was, words) -> Counterfactual:
    """The first value of `field` (in `values`, each a step further from `was`) that admits."""
    before = runner.runs
    option = _policy_values(runner, kind, title, field, values, was, words)
    return replace(option, runs=runner.runs - before)


def _policy_values(runner: Runner, kind: str, title: str, field: str, values, was, words) -> Counterfactual:
    frame = runner.request.project_frame
    policy = frame.admission

    def make(value):
        changed = replace(policy, **{field: value}, origin="frame")
        return replace(runner.request, project_frame=replace(frame, admission=changed))

    values = list(values)
    if not values:
        return inapplicable(kind, title, note=f"{words(was)} is already at its bound")
    start = replace(runner.probe(was, runner.base), value=was)
    value, probe, result, previous = search_linear(runner, values, make, start)
    if value is None:
        return not_found(
            kind,
            title,
            f"down to {words(values[-1])}" if isinstance(was, float) else f"up to {words(values[-1])}",
            probe,
            runner.runs,
            note=f"still {probe.disposition or 'not a candidate'} at {words(values[-1])} "
            f"({probe.reason_code or 'never surfaced'})",
        )
    gained, lost = runner.effects(result)
    return Counterfactual(
        kind, title, True, True, value, f"{words(value)} (was {words(was)})", probe, previous, gained, lost, runner.runs
    )


def stop_rule_levers(runner: Runner, trace: ContextTrace) -> list[Counterfactual]:
    """Each field of the stop rule the frame declares, loosened one step at a time, and the rule
    switched off: only for a unit the stop rule stopped (it stops nothing else)."""
    policy: AdmissionPolicy = runner.request.project_frame.admission
    record = runner.base.trace.candidate(runner.unit_id)
    title = "The stop rule"
    if not condition_of(trace).admission_stop:
        return [inapplicable("stop_rule", title, note=f"{trace.effective_condition} applies no stop rule")]
    if policy.rule == "none":
        return [inapplicable("stop_rule", title, note="the frame declares no stop rule (rule none)")]
    if record is None or record.reason_code != ReasonCode.ADMISSION_STOPPED:
        why = record.reason_code if record else "never a candidate"
        return [inapplicable("stop_rule", title, note=f"the stop rule did not stop it ({why})")]
    # the unlisted cap and floor read only the unlisted-class bucket; the floor and the tier cap
    # only the listed classes' buckets
    unlisted = (record.stop_note or "").startswith("unlisted")
    options = []
    if policy.rule == "relative" and not unlisted:
        options.append(
            _policy_search(
                runner,
                "stop_floor",
                "A lower stop-rule floor",
                "floor",
                _floors(policy.floor),
                policy.floor,
                lambda v: f"floor {v:g}",
            )
        )
        if policy.tier_cap is not None:
            options.append(
                _policy_search(
                    runner,
                    "stop_tier_cap",
                    "A larger tier cap",
                    "tier_cap",
                    range(policy.tier_cap + 1, policy.tier_cap + MAX_CAP_RAISE + 1),
                    policy.tier_cap,
                    lambda v: f"tier cap {v}",
                )
            )
    if policy.rule == "relative" and unlisted:
        options.append(
            _policy_search(
                runner,
                "stop_unlisted",
                "More room for unlisted classes",
                "unlisted",
                range(policy.unlisted + 1, policy.unlisted + MAX_CAP_RAISE + 1),
                policy.unlisted,
                lambda v: f"{v} unlisted-class items",
            )
        )
    if policy.rule == "relative" and not unlisted and policy.tier_cap is not None:
        if not any(o.found for o in options):  # neither field alone admits it: both together
            options.append(_floor_and_cap(runner))
    if unlisted and (policy.rule == "unlisted" or policy.unlisted_floor is not None):
        was = DEFAULT_UNLISTED_FLOOR if policy.unlisted_floor is None else policy.unlisted_floor
        options.append(
            _policy_search(
                runner,
                "stop_unlisted_floor",
                "A lower unlisted floor",
                "unlisted_floor",
                _floors(was),
                was,
                lambda v: f"unlisted floor {v:g}",
            )
        )
    options.append(
        _policy_search(
            runner,
            "stop_rule",
            "No stop rule",
            "rule",
            ["none"],
            policy.rule,
            lambda v: "no stop rule" if v == "none" else f"rule {v}",
        )
    )
    return options


def _floor_and_cap(runner: Runner) -> Counterfactual:
    """The floor lowered and the tier cap raised together, for a unit neither admits alone: both
    loosened one step at a time until it is admitted, then each tightened back while it stays
    admitted (so neither field moves further than the other needs)."""
    before = runner.runs
    frame = runner.request.project_frame
    policy = frame.admission
    kind, title = "stop_floor_and_cap", "A lower floor and a larger tier cap together"

    def make(floor, cap):
        changed = replace(policy, floor=floor, tier_cap=cap, origin="frame")
        return replace(runner.request, project_frame=replace(frame, admission=changed))

    def admits(floor, cap):
        result = runner.run(make(floor, cap))
        probe = runner.probe(f"floor {floor:g}, tier cap {cap}", result)
        return runner.admitted(probe), probe, result

    floors = _floors(policy.floor) or [policy.floor]
    steps = max(len(floors), MAX_CAP_RAISE)
    found = None
    for step in range(1, steps + 1):
        floor, cap = floors[min(step, len(floors)) - 1], policy.tier_cap + min(step, MAX_CAP_RAISE)
        ok, probe, result = admits(floor, cap)
        if ok:
            found = (floor, cap, probe, result)
            break
        previous = probe
    if found is None:
        words = f"floor {floors[-1]:g} with tier cap {policy.tier_cap + MAX_CAP_RAISE}"
        return replace(
            not_found(kind, title, f"down to {words}", previous, 0, note=f"still not admitted at {words}"),
            runs=runner.runs - before,
        )
    floor, cap, probe, result = found
    # tighten back: the highest floor that still admits at this cap, then the smallest cap
    for higher in [policy.floor, *(f for f in floors if f > floor)]:
        ok, p, r = admits(higher, cap)
        if ok:
            floor, probe, result = higher, p, r
            break
    for smaller in range(policy.tier_cap + 1, cap):
        ok, p, r = admits(floor, smaller)
        if ok:
            cap, probe, result = smaller, p, r
            break
    gained, lost = runner.effects(result)
    setting = f"floor {floor:g} and tier cap {cap} (was floor {policy.floor:g}, tier cap {policy.tier_cap})"
    return Counterfactual(
        kind,
        title,
        True,
        True,
        floor,
        setting,
        probe,
        None,
        gained,
        lost,
        runner.runs - before,
        note="each field alone is searched above; together they admit it",
    )


def scope_lever(runner: Runner, trace: ContextTrace) -> Counterfactual:
    """The unit's project added to the frame's scope (one run)."""
    frame = runner.request.project_frame
    unit = runner.index.unit(runner.unit_id)
    title = "A wider scope"
    if unit is None:
        return inapplicable("scope", title, note="the unit is not in the corpus")
    if not condition_of(trace).scope_filter:
        return inapplicable("scope", title, note=f"{trace.effective_condition} does not filter by scope")
    if unit.project in frame.scope_set:
        return inapplicable("scope", title, note=f"project {unit.project} is already in scope")
    scope = tuple(sorted(frame.scope_set | {unit.project}))

    def make(value):
        return replace(runner.request, project_frame=replace(frame, scope=scope))

    start = replace(runner.probe(0, runner.base), value=0)
    value, probe, result, previous = search_linear(runner, [1], make, start)
    if value is None:
        return not_found(
            "scope",
            title,
            f"scope {', '.join(scope)}",
            probe,
            runner.runs,
            note=f"still {probe.disposition or 'not a candidate'} with {unit.project} in scope "
            f"({probe.reason_code or 'never surfaced'})",
        )
    gained, lost = runner.effects(result)
    return Counterfactual(
        "scope",
        title,
        True,
        True,
        1,
        f"scope {', '.join(scope)} (adds {unit.project})",
        probe,
        previous,
        gained,
        lost,
        runner.runs,
    )


def _named(runner: Runner, unit_ids) -> tuple[Successor, ...]:
    out = []
    for uid in unit_ids:
        record = runner.base.trace.candidate(uid)
        out.append(Successor(uid, record.disposition if record else None, record.reason_code if record else None))
    return tuple(out)


def decision(runner: Runner) -> Decision | None:
    """The rule that disposed of the unit in the re-run, and the units it names; None: admitted."""
    record = runner.base.trace.candidate(runner.unit_id)
    if record is None:
        return Decision("retrieval", None, "retrieval did not surface it as a candidate")
    if runner.admitted(runner.probe(0, runner.base)):
        return None
    failed = next((c for c in record.eligibility if not c.passed), None)
    if failed is not None:
        units = ()
        if failed.rule == "supersession":
            units = _named(runner, runner.index.successors(runner.unit_id))
        return Decision(failed.rule, failed.reason_code, failed.detail, units)
    code = record.reason_code
    if code == ReasonCode.ADMISSION_STOPPED:
        return Decision("stop rule", code, record.stop_note or "")
    if code == ReasonCode.REDUNDANT_WITH_ADMITTED:
        jaccard = record.redundancy_with_admitted
        return Decision(
            "redundancy", code, f"restates an admitted unit (word overlap {jaccard:.2f})" if jaccard else ""
        )
    if code == ReasonCode.BUDGET_EXHAUSTED:
        return Decision(
            "budget", code, f"{record.budget.remaining} tokens were left; its item needs about {record.unit_tokens}"
        )
    return Decision(record.stage, code, "")
