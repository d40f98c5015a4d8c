"""rules.gate_verdict without a database: the book's four decisions, each bound, the reasons."""

from __future__ import annotations

import pytest

from rules.gate_verdict import GateSpecError, decide, gate_metrics
from selection.corpus.frames import check_frame
from selection.corpus.places import Place, Report
from selection.engine.gates import Gates

BOOK_GATES = {
    "primary": "must_include_recall",
    "min_improvement": 0.0,
    "limits": [
        {"metric": "precision", "max_drop": 0.02},
        {"metric": "harmful_admission", "max_rise": 0.0},
        {"metric": "leakage", "max_rise": 0.0},
    ],
}


def side(recall, precision, harmful=0.0, leakage=0.0):
    """One task per recall value; every task gets the same precision (so the mean is exact)."""
    return {
        f"t{i}": {
            "must_include_recall": r,
            "precision": precision,
            "harmful_admission": harmful,
            "leakage": leakage,
            "tokens": 1000.0,
        }
        for i, r in enumerate(recall)
    }


# book-ch10 §5, per-task must_include_recall of the baseline and the four proposals
BASELINE = [0.75, 0.8333, 0.6667, 1.0, 1.0, 1.0, 1.0, 0.6667, 1.0]
PROSE = [0.75, 0.6667, 0.6667, 0.5, 1.0, 1.0, 1.0, 0.6667, 1.0]
CONTRACT = [0.75, 0.8333, 1.0, 1.0, 1.0, 1.0, 1.0, 0.6667, 1.0]
PULL = [1.0, 0.8333, 0.6667, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
COMBINED = [1.0, 0.6667, 0.3333, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("recall", "precision", "passed", "delta"),
    [
        (PROSE, 0.352, False, -0.074),
        (CONTRACT, 0.368, True, 0.037),
        (PULL, 0.3663, True, 0.065),
        (COMBINED, 0.3412, False, -0.046),
    ],
)
def test_the_books_four_decisions(recall, precision, passed, delta):
    decision = decide(BOOK_GATES, side(BASELINE, 0.3666), side(recall, precision))
    assert decision.passed is passed
    assert decision.primary.delta == pytest.approx(delta, abs=5e-4)
    assert [g.gate for g in decision.gates] == ["primary", "max_drop", "max_rise", "max_rise"]


def test_combined_is_refused_on_precision_and_recall_with_both_reasons():
    decision = decide(BOOK_GATES, side(BASELINE, 0.3666), side(COMBINED, 0.3412))
    failed = {g.metric: g.reason for g in decision.gates if not g.passed}
    assert failed["precision"] == "precision fell to 0.341 from 0.367, more than the 0.02 drop allowed"
    assert failed["must_include_recall"].startswith("must_include_recall fell to 0.833 from 0.880")
    assert set(failed) == {"precision", "must_include_recall"}
    assert "precision fell" in decision.reason


def test_a_small_drop_is_within_the_allowance():
    decision = decide(BOOK_GATES, side(BASELINE, 0.3666), side(CONTRACT, 0.352))
    precision = decision.gates[1]
    assert precision.passed
    assert precision.reason == "precision fell to 0.352 from 0.367, within the 0.02 drop allowed"
    assert decision.passed


def test_an_improvement_of_exactly_the_minimum_does_not_pass():
    gates = {"primary": "precision", "min_improvement": 0.1}
    decision = decide(gates, side([1.0], 0.5), side([1.0], 0.6))
    assert not decision.passed
    assert "it must rise by more than 0.1" in decision.primary.reason


def test_equal_means_are_not_an_improvement_even_with_float_noise():
    base = {"a": {"must_include_recall": 0.1}, "b": {"must_include_recall": 0.2}, "c": {"must_include_recall": 0.3}}
    cand = {"a": {"must_include_recall": 0.3}, "b": {"must_include_recall": 0.1}, "c": {"must_include_recall": 0.2}}
    decision = decide({}, base, cand)
    assert not decision.passed
    assert decision.primary.reason.startswith("must_include_recall held at 0.200")


def test_any_harmful_rise_breaches_a_no_rise_gate():
    decision = decide(BOOK_GATES, side(BASELINE, 0.3666), side(PULL, 0.3666, harmful=0.05))
    harmful = decision.gates[2]
    assert not harmful.passed and not decision.passed
    assert harmful.reason == "harmful_admission rose to 0.050 from 0.000, no rise allowed"


def test_max_and_min_bounds_judge_the_candidate_alone():
    gates = {
        "limits": [
            {"metric": "leakage", "max": 0.0},
            {"metric": "precision", "min": 0.4},
            {"metric": "tokens", "max": 1500, "min": 10},
        ]
    }
    decision = decide(gates, side([0.5], 0.5), side([0.8], 0.35, leakage=0.1))
    by = {(g.metric, g.gate): g for g in decision.gates}
    assert by[("leakage", "max")].reason == "leakage is 0.100, above the maximum of 0"
    assert by[("precision", "min")].reason == "precision is 0.350, below the minimum of 0.4"
    assert by[("tokens", "max")].passed and by[("tokens", "min")].passed
    assert by[("tokens", "max")].reason == "tokens is 1000.0, within the maximum of 1500"
    assert by[("must_include_recall", "primary")].passed
    assert not decision.passed


def test_per_task_deltas_cover_the_primary_and_each_gate_metric_in_task_order():
    decision = decide(BOOK_GATES, side(BASELINE, 0.3666), side(PROSE, 0.352))
    assert decision.metrics == ("must_include_recall", "precision", "harmful_admission", "leakage")
    assert [row.task for row in decision.per_task] == [f"t{i}" for i in range(9)]
    t3 = decision.per_task[3]
    assert t3.delta["must_include_recall"] == pytest.approx(-0.5)
    assert t3.baseline["precision"] == 0.3666 and t3.candidate["precision"] == 0.352
    assert "tokens" not in t3.delta  # not a gate metric here
    assert decision.baseline_means["tokens"] == 1000.0  # every measured metric has a mean


def test_gates_default_to_must_include_recall_with_no_limits():
    assert gate_metrics({}) == ("must_include_recall",)
    decision = decide({}, side([0.5], 0.3), side([0.75], 0.1))
    assert decision.passed and len(decision.gates) == 1


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        ({"limits": [{"metric": "precision", "max_fall": 0.1}]}, 'unknown limit bound "max_fall"'),
        ({"limits": [{"metric": "precision"}]}, "names no bound"),
        ({"primary": "overlap"}, 'gate metric "overlap" was not measured'),
    ],
)
def test_unjudgeable_gates_are_refused(gates, message):
    with pytest.raises(GateSpecError, match=message):
        decide(gates, side([0.5], 0.3), side([0.5], 0.3))


def test_sides_must_replay_the_same_tasks():
    with pytest.raises(GateSpecError, match="different tasks: t1"):
        decide({}, side([0.5, 0.5], 0.3), side([0.5], 0.3))
    with pytest.raises(GateSpecError, match="nothing to judge"):
        decide({}, {}, {})


def test_the_corpus_readers_gates_are_the_ones_a_stored_mapping_reads_into():
    # one typed specification from corpus.yaml to decide(): the reader's Gates equal the stored
    # mapping's, and judge identically
    report = Report()
    frame = check_frame({"gates": BOOK_GATES}, Place("frame"), report, project="p", declared=["p"])
    assert len(report) == 0 and frame is not None
    assert frame.gates == Gates.from_spec(BOOK_GATES)
    assert gate_metrics(frame.gates) == gate_metrics(BOOK_GATES)
    typed = decide(frame.gates, side(BASELINE, 0.3666), side(CONTRACT, 0.352))
    raw = decide(BOOK_GATES, side(BASELINE, 0.3666), side(CONTRACT, 0.352))
    assert typed == raw and typed.passed


# --- per-task floors, intervals, counts --------------------------------------------------------


def test_a_per_task_floor_rejects_a_rising_mean_that_costs_one_task_its_must_units():
    gates = {**BOOK_GATES, "limits": [{"metric": "must_include_recall", "max_task_drop": 0.25}]}
    baseline = side([0.5, 0.5, 0.5, 0.5, 1.0], 0.4)
    candidate = side([1.0, 1.0, 1.0, 1.0, 0.0], 0.4)  # mean 0.6 -> 0.8, but t4 loses everything
    decision = decide(gates, baseline, candidate)
    assert decision.primary.passed  # the mean rose
    floor = decision.gates[1]
    assert (floor.gate, floor.passed, floor.tasks) == ("max_task_drop", False, ("t4",))
    assert floor.reason == (
        "must_include_recall fell by more than the 0.25 a task may lose on t4 (−1.000)"
    )
    assert not decision.passed
    # the same proposal without the collapse passes the floor
    assert decide(gates, baseline, side([1.0, 1.0, 1.0, 1.0, 0.9], 0.4)).passed


def test_every_gate_reports_a_reproducible_interval_and_the_task_counts():
    baseline, candidate = side(BASELINE, 0.389), side(CONTRACT, 0.389)
    first = decide(BOOK_GATES, baseline, candidate).primary
    again = decide(BOOK_GATES, baseline, candidate).primary
    assert first.interval == again.interval  # seeded bootstrap: identical across runs
    low, high = first.interval
    assert low <= first.delta <= high
    assert (first.improved, first.regressed, first.held) == (1, 0, 8)
    assert "over 9 tasks; 1 improved, 0 regressed, 8 held" in first.evidence
    assert "9 tasks are too few" in first.evidence  # the book's nine tasks cannot settle +0.037


def test_an_interval_gate_refuses_a_mean_rise_that_noise_could_explain():
    baseline = side([0.5] * 12, 0.4)
    candidate = side([1.0, 0.0] * 5 + [1.0, 1.0], 0.4)  # mean +0.083, but half the tasks fell
    plain = decide(BOOK_GATES, baseline, candidate)
    assert plain.primary.passed
    strict = decide({**BOOK_GATES, "require_interval": True}, baseline, candidate)
    assert not strict.primary.passed
    assert "interval's lower bound" in strict.primary.reason
    assert "includes zero" in strict.primary.evidence


def test_the_frame_reader_accepts_task_floors_and_interval_gates():
    report = Report()
    frame = check_frame(
        {"gates": {"require_interval": True, "limits": [{"metric": "precision", "max_task_drop": 0.1}]}},
        Place("frame"), report, project="alpha", declared=["alpha"],
    )
    assert not report.issues
    assert frame.gates.require_interval is True
    assert frame.gates.limits[0].max_task_drop == 0.1
    report = Report()
    check_frame({"gates": {"require_interval": "yes"}}, Place("frame"), report, project="alpha", declared=["alpha"])
    assert "expected true or false" in str(report.issues[0])
