"""select()'s timings hook: a caller learns where the time went, and the result does not change."""

import itertools

import pytest
from engine_testkit import mini_request, mini_units

from selection.engine import CorpusIndex, StageTimings, TimedStage, select


@pytest.fixture(scope="module")
def index():
    return CorpusIndex.build(mini_units())


@pytest.mark.parametrize("condition", ["C0", "C6"])
def test_a_timed_selection_records_its_stages_and_selects_the_same(index, condition):
    ticks = itertools.count()
    timings = StageTimings(clock=lambda: float(next(ticks)))  # each clock read one "second" later
    timed = select(mini_request(condition), index, timings=timings)
    plain = select(mini_request(condition), index)
    assert timed.bundle.digest == plain.bundle.digest
    assert timed.trace.as_dict() == plain.trace.as_dict()
    # each stage ran once: two clock reads, one second apart
    assert timings.seconds == {TimedStage.RETRIEVAL: 1.0, TimedStage.TRACE_RECORDS: 1.0}
    assert timings.ms(TimedStage.RETRIEVAL) == 1000.0 and timings.ms(TimedStage.EMBED) == 0.0


def test_timings_sum_over_runs_until_cleared(index):
    timings = StageTimings()
    for _ in range(3):
        select(mini_request("C4"), index, timings=timings)
    assert timings.seconds[TimedStage.RETRIEVAL] > 0 and timings.seconds[TimedStage.TRACE_RECORDS] > 0
    timings.clear()
    assert timings.seconds == {}


def test_the_oracle_times_its_retrieval_too(index):
    timings = StageTimings()
    ledger = {u.id: "MUST" for u in mini_units()[:2]}
    select(mini_request("CO", ledger=ledger), index, timings=timings)
    assert set(timings.seconds) == {TimedStage.RETRIEVAL, TimedStage.TRACE_RECORDS}
