"""Pool widening: the pool widens when retrieval is the bottleneck (its tail still scores near its
head), from C4 on, deterministically, and the trace says so."""

from dataclasses import replace

from engine_testkit import ALPHA, mini_request, mini_work, mk

from selection.engine import CorpusIndex, select
from selection.engine.types import EngineConfig

# a flat list: fifty notes that match the query equally well (and a hundred that do not, so the
# terms stay rare enough for BM25 to score them)
OTHER = [mk(f"x-{i:03d}", "unrelated words entirely", "note") for i in range(100)]
FLAT = [mk(f"n-{i:03d}", "ledger drift audit", "note") for i in range(50)] + OTHER
# a list that drops off: three strong hits, then nothing lexical at all
STEEP = [mk(f"s-{i}", "ledger drift audit ledger drift", "note") for i in range(3)] + [
    mk(f"o-{i:03d}", "unrelated words entirely", "note") for i in range(60)
]
FRAME = replace(ALPHA, class_pull=0)
CONFIG = EngineConfig(pool_size=20, pool_widen_step=10, pool_widen_max=40, pool_widen_tail=0.55)


def request(condition, query="ledger drift audit"):
    return mini_request(condition, query=query, work=mini_work("review", objective=""), frame=FRAME)


def retrieval_counts(result):
    stage = next(st for st in result.trace.stages if st.stage == "retrieval")
    return dict(stage.detail)


def test_a_pool_whose_tail_scores_like_its_head_widens_to_the_maximum_and_the_trace_says_so():
    index = CorpusIndex.build(FLAT)
    result = select(request("C4"), index, CONFIG)
    counts = retrieval_counts(result)
    assert counts["pool_size"] == "40" and counts["widened_from"] == "20"
    assert counts["widen_rounds"] == "2" and counts["tail_ratio_pct"] == "100"
    assert counts["retrieved"] == "40"
    assert select(request("C4"), index, CONFIG).trace.as_dict() == result.trace.as_dict()


def test_a_pool_that_drops_off_does_not_widen():
    index = CorpusIndex.build(STEEP)
    counts = retrieval_counts(select(request("C4", "ledger drift"), index, CONFIG))
    assert counts["pool_size"] == "20" and "widened_from" not in counts


def test_the_query_only_rungs_keep_the_fixed_pool():
    index = CorpusIndex.build(FLAT)
    for condition in ("C0", "C1", "C2", "C3"):
        counts = retrieval_counts(select(request(condition), index, CONFIG))
        assert counts["retrieved"] == "20" and "pool_size" not in counts, condition


def test_widening_is_off_when_the_maximum_is_the_pool_size():
    index = CorpusIndex.build(FLAT)
    off = replace(CONFIG, pool_widen_max=CONFIG.pool_size)
    counts = retrieval_counts(select(request("C6"), index, off))
    assert counts["retrieved"] == "20" and "pool_size" not in counts
