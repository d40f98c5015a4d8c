"""The counterfactual tries every lever the frame has: each field of the stop rule, the rule
itself and the scope, besides budget, class order and class pull; and it names the rule and the
unit that decided a unit's fate (a superseded unit's successor). Every answer is checked by
running the engine again with the value found and the value one step smaller."""

from dataclasses import replace

import pytest
from engine_testkit import ALPHA, mini_request, mini_units, mini_work

from selection.engine import CorpusIndex, ReasonCode, select
from selection.engine.counterfactual import counterfactuals
from selection.engine.types import AdmissionPolicy

FLOORED = AdmissionPolicy(rule="relative", floor=0.9, unlisted=9)
CAPPED = AdmissionPolicy(rule="relative", floor=0.0, unlisted=9, tier_cap=1)


@pytest.fixture(scope="module")
def index():
    return CorpusIndex.build(mini_units())


def request_with(policy=None, **frame):
    changed = replace(ALPHA, **frame) if frame else ALPHA
    if policy is not None:
        changed = replace(changed, admission=policy)
    return mini_request("C6", work=mini_work("review"), frame=changed)


def report(index, request, unit):
    return counterfactuals(select(request, index).trace, unit, index, request)


def option(found, kind):
    return next(o for o in found.options if o.kind == kind)


def admitted(index, request, unit) -> bool:
    return unit in select(request, index).trace.admitted_unit_ids()


def test_a_lower_floor_admits_a_unit_the_stop_rule_stopped(index):
    request = request_with(FLOORED)
    assert select(request, index).trace.candidate("a-result").reason_code == ReasonCode.ADMISSION_STOPPED
    found = report(index, request, "a-result")
    floor = option(found, "stop_floor")
    assert floor.found and floor.value == 0.65 and "floor 0.65 (was floor 0.9)" in floor.setting
    assert floor.below.value == 0.7 and floor.below.reason_code == ReasonCode.ADMISSION_STOPPED
    # the engine agrees: 0.65 admits it, 0.7 does not
    assert admitted(index, request_with(replace(FLOORED, floor=0.65)), "a-result")
    assert not admitted(index, request_with(replace(FLOORED, floor=0.7)), "a-result")
    # budget, class order and class pull cannot undo it: the report says so rather than guessing
    assert not option(found, "budget").found and not option(found, "class_pull").found
    # the stop rule's figures are the decision
    assert found.decided.rule == "stop rule" and "< 0.9 x" in found.decided.detail


def test_a_larger_tier_cap_admits_a_unit_its_tier_had_no_room_for(index):
    request = request_with(CAPPED)
    found = report(index, request, "a-result")
    cap = option(found, "stop_tier_cap")
    assert cap.found and cap.value == 4 and cap.below.value == 3
    assert admitted(index, request_with(replace(CAPPED, tier_cap=4)), "a-result")
    assert not admitted(index, request_with(replace(CAPPED, tier_cap=3)), "a-result")
    assert "tier cap 1" in found.decided.detail


def test_switching_the_stop_rule_off_admits_what_it_stopped(index):
    found = report(index, request_with(FLOORED), "a-result")
    off = option(found, "stop_rule")
    assert off.found and off.setting == "no stop rule (was rule relative)"
    assert admitted(index, request_with(replace(FLOORED, rule="none")), "a-result")


def test_the_unlisted_floor_of_the_engine_default_is_a_lever_too(index):
    request = request_with()  # ALPHA declares no admission: the engine's default, rule unlisted
    found = report(index, request, "a-loop")
    lowered = option(found, "stop_unlisted_floor")
    assert lowered.found and lowered.value < 0.75
    kinds = {o.kind for o in found.options}
    assert "stop_floor" not in kinds and "stop_tier_cap" not in kinds  # rule unlisted has neither


def test_the_scope_lever_adds_the_units_project(index):
    request = request_with()
    found = report(index, request, "b-rule")
    scope = option(found, "scope")
    assert scope.found and scope.setting == "scope alpha, beta (adds beta)"
    assert scope.below.reason_code == ReasonCode.OUT_OF_PROJECT_SCOPE
    assert admitted(index, request_with(scope=("alpha", "beta")), "b-rule")
    assert found.decided.rule == "scope" and "outside scope alpha" in found.decided.detail
    # a unit already in scope: the lever does not apply, and says why
    assert not option(report(index, request, "a-sqlite"), "scope").applicable


def test_a_superseded_unit_names_the_successor_that_decided_it(index):
    found = report(index, request_with(), "a-sqlite")
    assert found.decided.rule == "supersession"
    assert found.decided.reason_code == ReasonCode.SUPERSEDED_SUCCESSOR_AVAILABLE
    [successor] = found.decided.units
    assert successor.unit_id == "a-postgres" and successor.disposition == "admitted"


def test_the_stop_rule_is_no_lever_for_a_unit_it_did_not_stop(index):
    found = report(index, request_with(FLOORED), "b-rule")
    [rule] = [o for o in found.options if o.kind.startswith("stop")]
    assert not rule.applicable and "did not stop it (OUT_OF_PROJECT_SCOPE)" in rule.note


def test_an_admitted_unit_needs_no_lever_and_no_decision(index):
    found = report(index, request_with(), "a-rule")
    assert found.options == () and found.decided is None


def test_a_floor_and_a_tier_cap_loosened_together_when_neither_alone_admits(index):
    both = AdmissionPolicy(rule="relative", floor=0.9, unlisted=9, tier_cap=1)
    request = request_with(both)
    found = report(index, request, "a-result")
    assert not option(found, "stop_floor").found and not option(found, "stop_tier_cap").found
    together = option(found, "stop_floor_and_cap")
    assert together.found
    floor, cap = together.value, int(together.setting.split("tier cap ")[1].split(" ")[0])
    assert together.setting.endswith("(was floor 0.9, tier cap 1)")
    assert admitted(index, request_with(replace(both, floor=floor, tier_cap=cap)), "a-result")
    # neither field moved further than needed: one step back on either and the unit is stopped again
    assert not admitted(index, request_with(replace(both, floor=round(floor + 0.05, 2), tier_cap=cap)), "a-result")
    assert not admitted(index, request_with(replace(both, floor=floor, tier_cap=cap - 1)), "a-result")
