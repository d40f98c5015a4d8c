"""Class preference among supported candidates (EngineConfig.weak_support_fraction): a
retrieved candidate of a listed class whose evidence is below f x the pool's best leaves its class
bucket for the weak bucket after every class bucket, and its trace says why; pulled units keep
their bucket; off by default."""

import pytest
from engine_testkit import mini_request, mini_units, mini_work

from selection.engine import CorpusIndex, select
from selection.engine.types import EngineConfig

WEAK = 5  # review lists rule, decision, result, prose: the unlisted bucket is 4, the weak one 5


@pytest.fixture(scope="module")
def index():
    return CorpusIndex.build(mini_units())


def run(index, fraction):
    request = mini_request("C6", work=mini_work("review"))
    return select(request, index, EngineConfig(weak_support_fraction=fraction))


def evidence(c):
    s = c.signals
    return max(s.query_relevance or 0.0, s.objective_relevance or 0.0, c.retrieval.query_score)


def note(c):
    return next(p.note for p in c.contributions if p.signal == "goal_relevance")


def test_off_by_default_no_candidate_leaves_its_class_bucket(index):
    result = select(mini_request("C6", work=mini_work("review")), index)
    assert all(c.bucket is None or c.bucket < WEAK for c in result.trace.candidates)
    assert result.bundle.digest == run(index, None).bundle.digest


def test_a_weakly_supported_retrieved_candidate_ranks_after_every_class_bucket(index):
    result = run(index, 0.9)
    ranked = [c for c in result.trace.candidates if c.rank is not None]
    weak = [c for c in ranked if c.bucket == WEAK]
    assert weak, "f = 0.9 demotes something in the mini corpus"
    best = max(evidence(c) for c in ranked)
    last_class_rank = max(c.rank for c in ranked if c.bucket < WEAK)
    for c in weak:
        assert c.retrieval.pulled_by is None
        assert evidence(c) < 0.9 * best
        assert c.rank > last_class_rank
        assert note(c).startswith("weak support: evidence") and "0.9 x" in note(c)
    # pulled units keep their class bucket whatever their evidence
    assert all(c.bucket < WEAK for c in ranked if c.retrieval.pulled_by is not None)
    assert run(index, 0.9).bundle.digest == result.bundle.digest  # deterministic
