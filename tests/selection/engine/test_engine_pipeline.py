"""select(): every stage, every reason code, determinism, and a trace that explains rejections."""

import json
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from engine_testkit import (
    ALPHA,
    CROWD_QUERY,
    REPO,
    crowd_units,
    hash_vectors,
    mini_request,
    mini_units,
    mini_work,
    mk,
)

from selection.engine import (
    ContextBundle,
    ContextTrace,
    CorpusIndex,
    EngineConfig,
    ReasonCode,
    SelectionResult,
    UnknownCondition,
    select,
)
from selection.engine.coalesce import undo_coalescing
from selection.engine.types import EstablishmentPolicy, OpenLoop, WorkSignal, estimate_tokens


@pytest.fixture(scope="module")
def index():
    return CorpusIndex.build(mini_units())


def rec(result, uid):
    record = result.trace.candidate(uid)
    assert record is not None, f"{uid} was not a candidate"
    return record


# --- retrieval -------------------------------------------------------------------------------


def test_candidates_record_their_retrieval_sources_scores_and_ranks(index):
    r = select(mini_request("C0"), index)
    top = r.trace.candidates[0]
    assert top.retrieval.pool_rank == 1 and top.retrieval.fused_rank == 1
    assert "bm25" in top.retrieval.sources and top.retrieval.bm25_rank == 1
    assert top.retrieval.bm25_score > 0 and top.retrieval.dense_score is None
    assert r.trace.retriever.dense == "none" and r.trace.retriever.fusion.startswith("bm25-only")


def test_pool_size_is_configurable(index):
    r = select(mini_request("C0"), index, EngineConfig(pool_size=3))
    assert len(r.trace.candidates) == 3


def test_dense_search_surfaces_a_unit_without_lexical_overlap():
    units = mini_units() + [mk("a-quiet", "zebra quokka axolotl", "note")]
    vectors = hash_vectors([u.text for u in units])
    index = CorpusIndex.build(units, vectors)
    query_vector = tuple(float(x) for x in vectors[-1])  # the query embeds exactly like a-quiet
    r = select(mini_request("C0", query_vector=query_vector), index)
    quiet = rec(r, "a-quiet")
    assert quiet.retrieval.bm25_score == 0.0 and quiet.retrieval.bm25_rank is None
    assert quiet.retrieval.dense_rank == 1 and quiet.retrieval.sources == ("dense",)
    assert quiet.disposition == "admitted"
    assert (
        r.trace.retriever.dense == "numpy-exact-cosine" and r.trace.retriever.fusion == "rrf(k=60)"
    )


def test_c4_objective_runs_as_a_second_query(index):
    work = mini_work(objective="PostgreSQL pgvector")
    query = "mechanism retrieval baseline"
    c3 = select(mini_request("C3", query=query, work=work), index)
    c4 = select(mini_request("C4", query=query, work=work), index)
    assert c3.trace.candidate("a-postgres") is None
    pg = rec(c4, "a-postgres")
    assert "objective_bm25" in pg.retrieval.sources and pg.retrieval.objective_bm25_rank == 1
    assert pg.retrieval.query_fused_rank is None and pg.retrieval.objective_fused_rank == 1


def test_c4_guarantees_class_pull_candidates_per_preferred_class(index):
    # nothing in the query reaches the open loop; the release work type prefers "todo"
    work = mini_work("release", objective="")
    r = select(mini_request("C4", query="mechanism", work=work), index)
    loop = rec(r, "a-loop")
    assert loop.retrieval.pulled_by == "class_pull:todo" and loop.retrieval.sources == (
        "class_pull",
    )
    assert (
        select(mini_request("C3", query="mechanism", work=work), index).trace.candidate("a-loop")
        is None
    )


def test_c5_pulls_the_successor_of_a_superseded_candidate(index):
    no_pull = replace(ALPHA, class_pull=0)  # so only the successor pull can bring PostgreSQL in
    r = select(
        mini_request("C5", query="SQLite tables", work=mini_work(objective=""), frame=no_pull),
        index,
    )
    pg = rec(r, "a-postgres")
    assert pg.retrieval.pulled_by == "successor_of:a-sqlite"
    assert rec(r, "a-sqlite").reason_code == ReasonCode.SUPERSEDED_SUCCESSOR_AVAILABLE
    c4 = select(
        mini_request("C4", query="SQLite tables", work=mini_work(objective=""), frame=no_pull),
        index,
    )
    assert (
        rec(c4, "a-sqlite").disposition == "admitted" and c4.trace.candidate("a-postgres") is None
    )


def lineage_units():
    """A strong result, a unit that supports it and one that refutes it (sharing none of the query's
    words), an open loop the query does not reach, three todos and fillers (positive idf)."""
    fillers = [mk(f"z-fill{i}", f"filler {w} words", "misc") for i, w in enumerate("abcdefgh")]
    return fillers + [
        mk("r-main", "The reranker lifts ndcg on the judged set.", "result"),
        mk("r-support", "Independent rerun agrees: gains hold.", "result", supports=("r-main",)),
        mk("r-refute", "Our replication disagrees entirely.", "result", refutes=("r-main",)),
        mk("t-a", "Tidy the glossary headings.", "todo", open_loop=OpenLoop("open", "todo")),
        mk("t-b", "Rerun the reranker ndcg check later.", "todo", open_loop=OpenLoop("open", "todo")),
        mk("t-c", "Closed: glossary reviewed.", "todo", open_loop=OpenLoop("closed", "todo")),
    ]


def test_c5_pulls_the_support_and_refute_neighbours_of_a_strong_candidate():
    idx = CorpusIndex.build(lineage_units())
    work, frame = mini_work(objective=""), replace(ALPHA, class_pull=0)
    c5 = select(mini_request("C5", query="reranker ndcg judged", work=work, frame=frame), idx)
    assert rec(c5, "r-support").retrieval.pulled_by == "supports:r-main"
    assert rec(c5, "r-refute").retrieval.pulled_by == "refutes:r-main"
    retrieval = next(st for st in c5.trace.stages if st.stage == "retrieval")
    assert ("neighbours_pulled", "2") in retrieval.detail
    c4 = select(mini_request("C4", query="reranker ndcg judged", work=work, frame=frame), idx)
    assert c4.trace.candidate("r-support") is None and c4.trace.candidate("r-refute") is None


def test_c5_pulls_open_loops_only_when_the_work_type_uses_them():
    idx = CorpusIndex.build(lineage_units())
    config = EngineConfig(open_loop_pull=1)
    no_class_pull = replace(ALPHA, class_pull=0)
    release = mini_request(
        "C5", query="glossary", work=mini_work("release", objective=""), frame=no_class_pull
    )
    got = select(release, idx, config)
    pulled = [c.unit_id for c in got.trace.candidates if c.retrieval.pulled_by == "open_loop"]
    # t-a is retrieved by the query itself; the pull adds the other open loop, never the closed t-c
    assert pulled == ["t-b"] and "bm25" in rec(got, "t-a").retrieval.sources
    review = replace(release, work_frame=mini_work("review", objective=""))
    assert not any(c.retrieval.pulled_by == "open_loop" for c in select(review, idx, config).trace.candidates)


def test_the_class_pull_fills_a_class_by_relevance_not_by_unit_id():
    idx = CorpusIndex.build(lineage_units())
    frame = replace(ALPHA, class_pull=1)
    work = mini_work("release", objective="")
    # a pool of one (fixed: not widened): the reranker result; the todo class is pulled, t-b is
    # relevant, t-a is not
    query = "reranker lifts ndcg judged set"
    fixed = EngineConfig(pool_size=1, pool_widen_max=1)
    r = select(mini_request("C4", query=query, work=work, frame=frame), idx, fixed)
    todos = [c.unit_id for c in r.trace.candidates if c.retrieval.pulled_by == "class_pull:todo"]
    assert todos == ["t-b"]


def test_c1_adds_the_most_recent_units_and_prefers_recent_work(index):
    config = EngineConfig(recency_additions=1)
    c0 = select(mini_request("C0", query="SQLite tables"), index, config)
    c1 = select(mini_request("C1", query="SQLite tables"), index, config)
    assert c0.trace.candidate("a-prose") is None
    assert rec(c1, "a-prose").retrieval.pulled_by == "recency"  # a-prose is 1 day old, the newest


# --- signals and eligibility -------------------------------------------------------------------


def test_a_rejected_candidate_carries_every_signal_not_zeros(index):
    config = EngineConfig(class_absent_query_rank=2)  # so C3's class rule rejects something
    c2 = select(mini_request("C2"), index, config)
    c3 = select(mini_request("C3"), index, config)
    rejected = next(
        c for c in c3.trace.candidates
        if c.reason_code == ReasonCode.CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE
    )
    admitted = rec(c2, rejected.unit_id)
    assert admitted.disposition == "admitted" and rejected.disposition == "rejected"
    assert rejected.stage == "eligibility"
    assert rejected.signals == admitted.signals  # the same evidence, whether or not it was admitted
    s = rejected.signals
    assert s.query_relevance > 0 and s.recency > 0 and s.project_relevance == 1.0
    assert s.temporal_validity > 0 and s.evidence_strength > 0
    assert rejected.retrieval.bm25_score > 0
    assert rejected.budget.spent == 0 and rejected.budget.remaining == 2000


def test_from_c2_retrieval_draws_the_pool_from_in_scope_units_and_counts_what_it_skipped(index):
    scoped = EngineConfig(scope_at_retrieval=True)
    c0 = select(mini_request("C0"), index, scoped)
    c2 = select(mini_request("C2"), index, scoped)
    assert rec(c0, "b-rule").disposition == "admitted"  # C0 has no scope
    assert c2.trace.candidate("b-rule") is None  # it never takes a place in the pool
    assert all(c.project == "alpha" for c in c2.trace.candidates)
    retrieval = next(st for st in c2.trace.stages if st.stage == "retrieval")
    # half the corpus is in scope: the full scan is masked and sees the hit it leaves out
    assert ("out_of_scope_skipped", "1") in retrieval.detail
    # the place it would have taken goes to an in-scope unit: a pool of 2 holds two alpha units
    small = select(mini_request("C2"), index, EngineConfig(pool_size=2, scope_at_retrieval=True))
    assert [c.project for c in small.trace.candidates] == ["alpha", "alpha"]
    # off (the default), the out-of-scope hit takes its place and eligibility rules it out
    off = select(mini_request("C2"), index)
    assert rec(off, "b-rule").reason_code == ReasonCode.OUT_OF_PROJECT_SCOPE


def test_an_out_of_scope_successor_pulled_into_the_pool_is_ruled_out_of_scope():
    units = [
        mk("a-old", "The baseline store keeps units in SQLite.", "decision", age=30, valid_to=None),
        mk("b-new", "Units move to PostgreSQL.", "decision", project="beta", age=1, supersedes=("a-old",)),
    ]
    idx = CorpusIndex.build(units)
    r = select(mini_request("C5", query="baseline store SQLite", work=mini_work(objective="")), idx)
    pulled = rec(r, "b-new")
    assert pulled.retrieval.pulled_by == "successor_of:a-old"
    assert pulled.reason_code == ReasonCode.OUT_OF_PROJECT_SCOPE and pulled.stage == "eligibility"


def test_signals_follow_their_formulas(index):
    r = select(
        mini_request("C5", query="SQLite tables baseline", work=mini_work("release", objective="")),
        index,
    )
    sqlite, echo = rec(r, "a-sqlite").signals, None
    assert sqlite.temporal_validity == 0.25  # valid_to lies before the standpoint
    assert sqlite.recency == pytest.approx(1 / (1 + 30 / 30))
    loop = rec(r, "a-loop").signals
    assert loop.open_loop_relevance == 1.0  # release is an open-loop work type
    r2 = select(mini_request("C5", query="restated mechanism baseline"), index)
    echo = rec(r2, "a-echo1").signals
    assert echo.evidence_strength == 0.35 and rec(r2, "a-echo1").signals.open_loop_relevance == 0.0
    assert rec(r2, "a-rule").signals.adjacency > 0  # its echoes are candidates too
    refute = rec(select(mini_request("C5", query="rerun contradicts"), index), "a-refute").signals
    assert refute.evidence_strength == 0.9


def test_query_and_objective_relevance_are_each_their_own_lists(index):
    r = select(mini_request("C4"), index)
    pool = r.trace.candidates
    for c in pool:
        q_rank, o_rank = c.retrieval.query_fused_rank, c.retrieval.objective_fused_rank
        assert (c.signals.query_relevance > 0) == (q_rank is not None)
        assert (c.signals.objective_relevance > 0) == (o_rank is not None)
    # without an objective query, the objective has no relevance at all
    c2 = select(mini_request("C2"), index)
    assert all(c.signals.objective_relevance == 0.0 for c in c2.trace.candidates)


@pytest.mark.parametrize("condition", ["C0", "C1", "C3", "C4", "C5", "C6"])
def test_every_signal_says_how_it_entered_the_rank_score(index, condition):
    r = select(mini_request(condition), index)
    ranked = [c for c in r.trace.candidates if c.rank is not None and c.eligible and c.contributions]
    assert ranked
    names = {"query_relevance", "objective_relevance", "goal_relevance", "project_relevance",
             "temporal_validity", "evidence_strength", "open_loop_relevance", "adjacency",
             "recency", "redundancy"}
    for c in ranked:
        got = {p.signal for p in c.contributions}
        assert names <= got <= names | {"pull"}
        assert sum(p.value for p in c.contributions) == pytest.approx(c.rank_score, abs=1e-5)
        goal = next(p for p in c.contributions if p.signal == "goal_relevance")
        assert goal.effect == "none" and "informational" in goal.note
        for p in c.contributions:
            assert p.effect != "none" or p.value == 0.0  # a signal that decided nothing adds nothing
    rejected = [c for c in r.trace.candidates if not c.eligible]
    assert all(c.contributions == () for c in rejected)


def test_layers_contribute_only_from_c5(index):
    query = "SQLite tables baseline store"
    c4 = rec(select(mini_request("C4", query=query), index), "a-sqlite")
    c5 = select(mini_request("C5", query=query), index)
    temporal = next(p for p in c4.contributions if p.signal == "temporal_validity")
    assert temporal.effect == "none" and temporal.value == 0.0
    stale = [c for c in c5.trace.candidates if c.signals.temporal_validity < 1 and c.contributions]
    for c in stale:
        part = next(p for p in c.contributions if p.signal == "temporal_validity")
        assert part.effect == "multiplier" and part.value < 0


def test_every_eligibility_rule_is_recorded_with_its_reason(index):
    r = select(mini_request("C5", query="SQLite tables baseline"), index)
    checks = {c.rule: c for c in rec(r, "a-sqlite").eligibility}
    assert set(checks) == {"scope", "supersession", "class"}
    assert checks["scope"].passed and checks["class"].passed
    assert not checks["supersession"].passed and "a-postgres" in checks["supersession"].detail
    assert checks["supersession"].reason_code == "SUPERSEDED_SUCCESSOR_AVAILABLE"


def test_class_absent_unit_needs_query_support():
    index = CorpusIndex.build(crowd_units())
    work = mini_work(objective="")
    r = select(mini_request("C4", query=CROWD_QUERY, work=work), index)
    g = rec(r, "a-gossip")
    assert g.retrieval.retrieval_rank > 10
    assert (
        g.reason_code == ReasonCode.CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE
        and g.disposition == "rejected"
    )
    assert (
        rec(select(mini_request("C2", query=CROWD_QUERY, work=work), index), "a-gossip").disposition
        == "admitted"
    )
    strong = select(mini_request("C4", query="someone mentioned gossip", work=work), index)
    assert rec(
        strong, "a-gossip"
    ).eligible  # rank 1 by query: kept although its class is not listed


# --- ranking ---------------------------------------------------------------------------------


def test_ranking_buckets_by_class_preference_then_score_then_unit_id(index):
    r = select(mini_request("C4"), index)
    ranked = sorted((c for c in r.trace.candidates if c.rank is not None), key=lambda c: c.rank)
    keys = [(c.bucket, -c.rank_score, c.retrieval.retrieval_rank, c.unit_id) for c in ranked]
    assert keys == sorted(keys)
    prefs = dict(ALPHA.work_types)["review"]
    assert [c.evidence_class for c in ranked][:1] == [prefs[0]]
    assert all(
        c.bucket == prefs.index(c.evidence_class) for c in ranked if c.evidence_class in prefs
    )


def test_c3_ranks_by_the_frames_default_classes(index):
    r = select(mini_request("C3"), index)
    first = min((c for c in r.trace.candidates if c.rank is not None), key=lambda c: c.rank)
    assert first.evidence_class == "result"  # ALPHA.default_classes
    c2 = select(mini_request("C2"), index)  # no class policy: the best query match leads
    assert (
        min((c for c in c2.trace.candidates if c.rank), key=lambda c: c.rank).evidence_class
        != "result"
    )


# --- coalescing ------------------------------------------------------------------------------


def test_c6_folds_echoes_into_the_item_they_restate_and_keeps_their_sources(index):
    r = select(mini_request("C6"), index)
    item = next(i for i in r.bundle.items if i.item_id == "item-a-rule")
    assert item.sources[0] == "a-rule" and set(item.sources[1:]) == {"a-echo1", "a-echo2"}
    assert "Restated" not in r.bundle.rendered  # the repetition is gone ...
    assert "a-echo1" in item.rendered  # ... its provenance is not
    for uid in ("a-echo1", "a-echo2"):
        record = rec(r, uid)
        assert (
            record.disposition == "folded"
            and record.reason_code == ReasonCode.ECHO_FOLDED_INTO_ITEM
        )
        assert record.item_id == "item-a-rule"
    assert {"a-echo1", "a-echo2"} <= set(r.bundle.unit_ids())
    c5 = select(mini_request("C5"), index)
    assert all(len(i.sources) == 1 for i in c5.bundle.items)


def test_c6_keeps_a_refutation_as_its_own_item_naming_what_it_contradicts(index):
    r = select(mini_request("C6", query="baseline result recall rerun"), index)
    refute = next(i for i in r.bundle.items if i.item_id == "item-a-refute")
    assert refute.sources == ("a-refute",) and refute.contradicts == ("a-result",)
    assert "Contradicts: a-result" in refute.rendered
    assert any(i.item_id == "item-a-result" for i in r.bundle.items)
    assert any(
        op.op == "preserve_disagreement" and op.target_id == "a-result" for op in r.trace.coalescing
    )


def test_c6_turns_supersession_into_a_note_on_the_successor(index):
    r = select(mini_request("C6", query="SQLite tables baseline store"), index)
    pg = next(i for i in r.bundle.items if i.item_id == "item-a-postgres")
    assert pg.notes == ("SQLite, superseded by PostgreSQL",)
    assert "History: SQLite, superseded by PostgreSQL" in pg.rendered
    assert "SQLite tables" not in r.bundle.rendered  # no budget spent on the stale passage
    sqlite = rec(r, "a-sqlite")
    assert sqlite.disposition == "rejected" and sqlite.noted_on == "item-a-postgres"
    assert "a-sqlite" not in r.bundle.unit_ids()


def test_coalescing_is_reversible_from_the_trace(index):
    r = select(mini_request("C6"), index)
    c5 = select(mini_request("C5"), index)
    undone = undo_coalescing([i.sources for i in r.bundle.items], r.trace.coalescing)
    assert sorted(u for entry in undone for u in entry) == sorted(r.bundle.unit_ids())
    assert all(len(entry) == 1 for entry in undone)
    folds = {op.unit_id: op for op in r.trace.coalescing if op.op == "fold_echo"}
    assert set(folds) == {c.unit_id for c in r.trace.candidates if c.disposition == "folded"}
    assert all(op.target_id == "a-rule" and op.item_id == "item-a-rule" for op in folds.values())
    # without coalescing the same units are admitted, each as its own passage
    assert set(r.bundle.unit_ids()) <= set(c5.bundle.unit_ids()) | set(folds)


def near_twins(refute: bool = False):
    units = [
        mk("a-one", "the retrieval baseline must be beaten at a matched budget", "rule"),
        mk(
            "a-two",
            "the retrieval baseline must be beaten at a matched budget too",
            "rule",
            refutes=("a-one",) if refute else (),
        ),
    ]
    return CorpusIndex.build(units)


def test_c6_folds_a_near_duplicate_into_the_item_it_restates_keeping_its_source():
    index = near_twins()
    c6 = select(mini_request("C6", query="retrieval baseline budget"), index)
    first = rec(c6, "a-two") if rec(c6, "a-two").disposition == "admitted" else rec(c6, "a-one")
    second = rec(c6, "a-one") if first.unit_id == "a-two" else rec(c6, "a-two")
    assert second.reason_code == ReasonCode.NEAR_DUPLICATE_FOLDED and second.disposition == "folded"
    assert second.redundancy_with_admitted > 0.6 and second.item_id == first.item_id
    item = next(i for i in c6.bundle.items if i.item_id == first.item_id)
    assert item.sources == (first.unit_id, second.unit_id)  # its provenance is in the bundle
    assert second.unit_id in item.rendered and len(c6.bundle.items) == 1
    op = next(op for op in c6.trace.coalescing if op.unit_id == second.unit_id)
    assert op.op == "fold_near_duplicate" and undo_coalescing([item.sources], [op]) == [
        (first.unit_id,),
        (second.unit_id,),
    ]
    assert {
        c.disposition
        for c in select(
            mini_request("C5", query="retrieval baseline budget"), index
        ).trace.candidates
    } == {"admitted"}


def test_c6_rejects_a_near_duplicate_as_redundant_when_its_source_would_not_fit():
    index = near_twins()
    full = select(mini_request("C6", query="retrieval baseline budget"), index)
    alone = select(mini_request("C6", query="retrieval baseline budget", budget=1), index)
    lone_tokens = -(-len(full.bundle.items[0].rendered.replace(", a-two", "").replace(", a-one", "")) // 4)
    tight = select(mini_request("C6", query="retrieval baseline budget", budget=lone_tokens), index)
    assert alone.bundle.items == ()
    second = [c for c in tight.trace.candidates if c.disposition != "admitted"]
    assert [c.reason_code for c in second] == [ReasonCode.REDUNDANT_WITH_ADMITTED]
    assert second[0].stage == "budget" and tight.bundle.tokens <= lone_tokens


def test_a_refuting_near_duplicate_is_never_folded_away():
    index = near_twins(refute=True)
    c6 = select(mini_request("C6", query="retrieval baseline budget"), index)
    assert {rec(c6, u).disposition for u in ("a-one", "a-two")} == {"admitted"}
    assert len(c6.bundle.items) == 2


# --- budget ----------------------------------------------------------------------------------


def test_budget_admits_whole_rendered_items_and_records_the_budget_state():
    import numpy as np

    # dense-only ranking fixes the order: first (short), second (long), third (short)
    units = [
        mk("a-1", "short first passage", "rule"),
        mk("a-2", "long second passage " * 20, "rule"),
        mk("a-3", "short third passage", "rule"),
    ]
    vectors = np.array([[1.0, 0.1, 0.0], [1.0, 0.3, 0.0], [1.0, 0.6, 0.0]], dtype=np.float32)
    index = CorpusIndex.build(units, vectors)
    ask = dict(query="zzz", query_vector=(1.0, 0.0, 0.0))
    full = select(mini_request("C2", budget=10_000, **ask), index)
    first, second, third = full.bundle.items
    assert [i.sources[0] for i in full.bundle.items] == ["a-1", "a-2", "a-3"]
    budget = first.tokens + third.tokens + 1
    r = select(mini_request("C2", budget=budget, **ask), index)
    assert [i.item_id for i in r.bundle.items] == [
        first.item_id,
        third.item_id,
    ]  # greedy: later items may fit
    for item in r.bundle.items:
        assert item.tokens == estimate_tokens(item.rendered)
        assert item.text in item.rendered  # never truncated
    assert r.bundle.tokens == estimate_tokens(r.bundle.rendered) <= budget
    omitted = rec(r, "a-2")
    assert (
        omitted.disposition == "budget_omitted"
        and omitted.reason_code == ReasonCode.BUDGET_EXHAUSTED
    )
    assert (omitted.budget.spent, omitted.budget.remaining) == (first.tokens, budget - first.tokens)
    assert (rec(r, "a-3").budget.spent, rec(r, "a-3").budget.remaining) == (
        first.tokens,
        budget - first.tokens,
    )
    assert rec(r, "a-1").budget.spent == 0


def test_budget_omission_is_not_a_policy_rejection(index):
    # scope at retrieval off, so the out-of-scope unit reaches eligibility and is ruled out there
    r = select(mini_request("C2", budget=0), index, EngineConfig(scope_at_retrieval=False))
    assert r.bundle.items == () and r.bundle.rendered == "" and r.bundle.tokens == 0
    dispositions = {c.unit_id: (c.disposition, c.eligible) for c in r.trace.candidates}
    assert dispositions["a-rule"] == ("budget_omitted", True)
    assert dispositions["b-rule"] == ("rejected", False)


# --- oracle, conditions, abstention ------------------------------------------------------------


def test_oracle_admits_must_then_should_within_the_budget(index):
    ledger = {
        "a-postgres": "MUST",
        "a-rule": "MUST",
        "a-prose": "SHOULD",
        "a-loop": "SHOULD",
        "a-sqlite": "HARMFUL",
        "gone": "MUST",
    }
    r = select(mini_request("CO", ledger=ledger), index)
    assert [i.sources[0] for i in r.bundle.items] == ["a-postgres", "a-rule", "a-loop", "a-prose"]
    assert all(rec(r, i.sources[0]).reason_code == ReasonCode.ORACLE_LEDGER for i in r.bundle.items)
    t = [i.tokens for i in r.bundle.items]
    assert t[2] != t[3]
    small, large = ("a-loop", "a-prose") if t[2] < t[3] else ("a-prose", "a-loop")
    r2 = select(mini_request("CO", ledger=ledger, budget=t[0] + t[1] + min(t[2], t[3])), index)
    assert [i.sources[0] for i in r2.bundle.items] == ["a-postgres", "a-rule", small]
    assert rec(r2, large).disposition == "budget_omitted"
    assert (
        r2.trace.candidate("a-sqlite") is None
    )  # HARMFUL and unlabelled units are never candidates
    with pytest.raises(ValueError):
        select(mini_request("CO"), index)


def test_conditions_c0_to_c6_never_read_the_ledger(index):
    for name in ("C0", "C1", "C2", "C3", "C4", "C5", "C6"):
        plain = select(mini_request(name), index)
        told = select(mini_request(name, ledger={"a-rule": "HARMFUL", "a-loop": "MUST"}), index)
        assert plain.bundle.digest == told.bundle.digest
        assert plain.trace.as_dict() == told.trace.as_dict()


def test_unknown_condition_is_rejected(index):
    with pytest.raises(UnknownCondition):
        select(mini_request("C7"), index)


def test_abstention_weakens_conditioning_but_leaves_declared_frames_alone(index):
    declared = select(mini_request("C6"), index)
    confident = select(
        mini_request("C6", work=replace(mini_work(), establishment="inferred-confident")), index
    )
    assert declared.trace.effective_condition == "C6" and declared.trace.condition_note == ""
    # an inferred frame, even a confident one, is hedged by the query-only head (frame policy)
    assert confident.trace.effective_condition == "C6~head"
    unhedged_frame = replace(ALPHA, establishment=EstablishmentPolicy(query_head=0.0))
    unhedged = select(
        mini_request(
            "C6",
            work=replace(mini_work(), establishment="inferred-confident"),
            frame=unhedged_frame,
        ),
        index,
    )
    assert unhedged.trace.effective_condition == "C6"
    assert unhedged.bundle.digest == declared.bundle.digest
    unknown = select(mini_request("C6", work=replace(mini_work(), establishment="unknown")), index)
    assert unknown.trace.condition == "C6" and unknown.trace.effective_condition == "C6~query"
    assert "unknown" in unknown.trace.condition_note
    assert all(c.bucket == 0 for c in unknown.trace.candidates if c.bucket is not None)
    ambiguous = select(
        mini_request("C6", work=replace(mini_work(), establishment="inferred-ambiguous")), index
    )
    assert ambiguous.trace.effective_condition == "C6~merged~head"
    soft_frame = replace(ALPHA, establishment=EstablishmentPolicy(ambiguous="soft"))
    soft = select(
        mini_request(
            "C6",
            work=replace(mini_work(), establishment="inferred-ambiguous"),
            frame=soft_frame,
        ),
        index,
    )
    assert soft.trace.effective_condition == "C6~soft~head"
    off = select(
        mini_request("C6", work=replace(mini_work(), establishment="unknown")),
        index,
        EngineConfig(abstention=False),
    )
    assert off.trace.effective_condition == "C6" and off.bundle.digest == declared.bundle.digest


def test_soft_frame_retains_a_class_absent_unit():
    index = CorpusIndex.build(crowd_units())
    work = replace(mini_work(objective=""), establishment="inferred-ambiguous")
    # without the hedge, so that the soft rule alone is what keeps the unit
    soft_frame = replace(ALPHA, establishment=EstablishmentPolicy(ambiguous="soft", query_head=0.0))
    r = select(mini_request("C4", query=CROWD_QUERY, work=work, frame=soft_frame), index)
    g = rec(r, "a-gossip")
    assert g.eligible and "soft frame" in g.eligibility[-1].detail


# --- every reason code, determinism, serialisation ------------------------------------------------


def test_every_reason_code_is_produced_by_some_selection(index):
    seen = set()
    for req in (
        mini_request("C2", budget=120),
        mini_request("C6", query="SQLite tables baseline"),
        mini_request("C6"),
        mini_request("CO", ledger={"a-rule": "MUST"}),
    ):
        seen |= {c.reason_code for c in select(req, index).trace.candidates}
    dup = [mk("a-dup", "baseline retrieval rule about amber", "rule")]  # a twin of a-r00
    extra = CorpusIndex.build(crowd_units() + dup)
    work = mini_work(objective="")
    seen |= {
        c.reason_code
        for c in select(mini_request("C6", query=CROWD_QUERY, work=work), extra).trace.candidates
    }
    lineage = CorpusIndex.build(
        [
            mk("a-old", "The baseline store keeps units in SQLite.", "decision", age=30),
            mk("b-new", "Units move to PostgreSQL.", "decision", project="beta", supersedes=("a-old",)),
        ]
    )
    seen |= {
        c.reason_code
        for c in select(
            mini_request("C5", query="baseline store SQLite", work=mini_work(objective="")), lineage
        ).trace.candidates
    }
    twins = near_twins()
    one = select(mini_request("C6", query="retrieval baseline budget"), twins).bundle.items[0]
    lone = -(-len(one.rendered.replace(", a-two", "").replace(", a-one", "")) // 4)
    seen |= {
        c.reason_code
        for c in select(mini_request("C6", query="retrieval baseline budget", budget=lone), twins)
        .trace.candidates
    }
    from selection.engine.types import AdmissionPolicy

    strict = replace(ALPHA, admission=AdmissionPolicy(rule="relative", floor=0.95, unlisted=0))
    seen |= {c.reason_code for c in select(mini_request("C6", frame=strict), index).trace.candidates}
    assert seen == {code.value for code in ReasonCode}


def test_reason_codes_are_each_documented_once():
    doc = (REPO / "docs" / "reason-codes.md").read_text()
    for code in ReasonCode:
        assert doc.count(f"`{code.value}`") == 1, code


def test_same_inputs_same_bundle_and_trace(index):
    a, b = select(mini_request("C6"), index), select(mini_request("C6"), index)
    assert a.bundle.digest == b.bundle.digest and a.trace.as_dict() == b.trace.as_dict()


def test_shuffling_units_vectors_and_signals_changes_nothing():
    units = mini_units()
    vectors = hash_vectors([u.text for u in units])
    signals = tuple(WorkSignal(f"s{i}", "event", f"signal {i}") for i in range(5))
    work = mini_work(signals=signals, cites=(("objective", ("s1", "s0")), ("work_type", ("s2",))))
    qv = tuple(float(x) for x in hash_vectors(["mechanism baseline"])[0])
    base_index = CorpusIndex.build(units, vectors)
    base = select(mini_request("C6", work=work, query_vector=qv, objective_vector=qv), base_index)
    rng = random.Random(7)
    for _ in range(3):
        order = list(range(len(units)))
        rng.shuffle(order)
        shuffled_index = CorpusIndex.build([units[i] for i in order], vectors[order])
        shuffled_signals = list(signals)
        rng.shuffle(shuffled_signals)
        cites = (("work_type", ("s2",)), ("objective", ("s0", "s1")))
        w = replace(work, signals=tuple(shuffled_signals), cites=cites)
        other = select(
            mini_request("C6", work=w, query_vector=qv, objective_vector=qv), shuffled_index
        )
        assert other.bundle.digest == base.bundle.digest
        assert other.trace.as_dict() == base.trace.as_dict()


def test_digest_is_sha256_of_the_rendering(index):
    import hashlib

    r = select(mini_request("C6"), index)
    assert r.bundle.digest == hashlib.sha256(r.bundle.rendered.encode()).hexdigest()
    assert r.bundle.rendered == "".join(i.rendered for i in r.bundle.items)
    assert r.trace.bundle_digest == r.bundle.digest and r.trace.bundle_tokens == r.bundle.tokens


def test_trace_and_bundle_round_trip_through_json(index):
    r = select(mini_request("C6", query="SQLite tables baseline"), index)
    data = json.loads(json.dumps(r.as_dict()))
    again = SelectionResult.from_dict(data)
    assert again == r
    assert ContextTrace.from_dict(json.loads(json.dumps(r.trace.as_dict()))) == r.trace
    assert ContextBundle.from_dict(r.bundle.as_dict()) == r.bundle
    keys = list(r.trace.as_dict())
    assert keys[:4] == ["schema", "engine_version", "policy_version", "condition"]
    record = r.trace.as_dict()["candidates"][0]
    assert list(record)[:3] == ["unit_id", "project", "evidence_class"]


def test_trace_holds_frames_policy_query_standpoint_budget_and_retriever(index):
    r = select(mini_request("C4"), index)
    t = r.trace
    assert t.project_frame.project == "alpha" and t.project_frame.version == 3
    assert t.work_frame.work_type == "review" and t.query.startswith("Does")
    assert t.standpoint is not None and t.budget_tokens == 2000
    assert t.policy_version and t.engine_version and t.config.pool_size == 40
    assert t.retriever.corpus_size == len(index) and len(t.retriever.corpus_digest) == 16
    assert [s.stage for s in t.stages] == [
        "retrieval",
        "signals",
        "eligibility",
        "ranking",
        "budget",
    ]


def test_engine_imports_no_django():
    engine = REPO / "selection" / "engine"
    for path in engine.rglob("*.py"):
        assert "django" not in path.read_text().lower().replace("no django", "").replace(
            "no_django", ""
        ), path
    code = (
        "import sys, selection.engine; "
        "assert not [m for m in sys.modules if m.startswith('django')]"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(REPO))


def test_a_scope_naming_no_loaded_project_admits_nothing_and_says_why(index):
    """Scoping fails closed: a scope the corpus cannot meet admits no unit, never every unit, and
    each rejection names the scope (the frame validator refuses an empty or undeclared scope first)."""
    nowhere = replace(ALPHA, scope=("nowhere",))
    r = select(mini_request("C6", frame=nowhere), index, EngineConfig(scope_at_retrieval=True))
    # scoped retrieval ranks the scope's units, none: the pool is empty and the trace says so
    assert not r.trace.candidates and not r.bundle.items
    detail = dict(next(st for st in r.trace.stages if st.stage == "retrieval").detail)
    assert detail["scope_units"] == "0" and detail["retrieved"] == "0"
    # with scope at retrieval off (the default), every hit is a candidate, ruled out by the scope rule
    r = select(mini_request("C6", frame=nowhere), index)
    assert r.trace.candidates and not r.bundle.items and r.trace.admitted_unit_ids() == ()
    for record in r.trace.candidates:
        assert record.reason_code == ReasonCode.OUT_OF_PROJECT_SCOPE, record
        (check,) = [c for c in record.eligibility if c.rule == "scope"]
        assert not check.passed and "outside scope nowhere" in check.detail


# --- the admission stop rule (C6, frame policy) --------------------------------------------------


def test_c6_stops_weak_evidence_before_the_budget_and_says_why():
    from selection.engine.types import AdmissionPolicy

    idx = CorpusIndex.build(mini_units())
    work = mini_work("review")
    strict = replace(ALPHA, admission=AdmissionPolicy(rule="relative", floor=0.95, unlisted=0))
    off = replace(ALPHA, admission=AdmissionPolicy(rule="none"))
    stopped = select(mini_request("C6", work=work, frame=strict), idx)
    full = select(mini_request("C6", work=work, frame=off), idx)
    halted = [c for c in stopped.trace.candidates if c.reason_code == ReasonCode.ADMISSION_STOPPED]
    assert halted and all(c.disposition == "rejected" and c.stop_note for c in halted)
    assert not any(c.reason_code == ReasonCode.ADMISSION_STOPPED for c in full.trace.candidates)
    assert stopped.bundle.tokens < full.bundle.tokens <= 2000  # the budget stays a ceiling
    # C5 has no stop rule, whatever the frame says
    c5 = select(mini_request("C5", work=work, frame=strict), idx)
    assert not any(c.reason_code == ReasonCode.ADMISSION_STOPPED for c in c5.trace.candidates)


# --- bundle order (frame policy) -----------------------------------------------------------------


def test_bundle_order_is_frame_policy_and_the_trace_names_the_rule(index):
    ranked = select(mini_request("C6"), index)
    stable = select(mini_request("C6", frame=replace(ALPHA, bundle_order="stable")), index)
    assert set(ranked.bundle.unit_ids()) == set(stable.bundle.unit_ids())  # membership is kept
    assert "by rank inside a bucket" in ranked.trace.order_rule
    assert "stable" in stable.trace.order_rule
    by_id = {c.unit_id: c for c in stable.trace.candidates}
    keys = [(by_id[i.sources[0]].bucket, i.sources[0]) for i in stable.bundle.items]
    assert keys == sorted(keys)
    # under "stable" two queries that admit the same units render the same bundle
    other = select(
        mini_request("C6", query="Is the retrieval baseline beaten by the mechanism?",
                     frame=replace(ALPHA, bundle_order="stable")),
        index,
    )
    assert set(other.bundle.unit_ids()) == set(stable.bundle.unit_ids())
    assert other.bundle.rendered == stable.bundle.rendered


def test_a_project_in_a_store_of_many_selects_as_it_would_alone():
    # twelve projects writing the same words: one project's scoped pool is its own units only, its
    # BM25 scores are those of an index of its units alone (the scope's own idf and average length,
    # bit for bit), so its bundle is the one it would get alone; the trace counts the out-of-scope
    # hits of the unscoped lexical list that took no place in the pool
    rng = random.Random(5)
    words = ("baseline retrieval budget scope store frame trace ledger mechanism result "
             "eval pool index query corpus bundle").split()
    classes = ("result", "decision", "todo", "note")
    units = [
        mk(f"{p}-u{i:02d}", " ".join(rng.choice(words) for _ in range(rng.randint(4, 12))),
           classes[i % 4], project=p, age=rng.randint(1, 40))
        for p in ["alpha", *(f"other{k:02d}" for k in range(11))]
        for i in range(10)
    ]
    store = CorpusIndex.build(units)
    alone = CorpusIndex.build([u for u in units if u.project == "alpha"])
    scoped = EngineConfig(scope_at_retrieval=True)
    for condition in ("C2", "C4", "C6"):
        in_store = select(mini_request(condition), store, scoped)
        by_itself = select(mini_request(condition), alone, scoped)
        assert in_store.bundle.digest == by_itself.bundle.digest, condition
        assert all(c.project == "alpha" for c in in_store.trace.candidates)
        assert [(c.unit_id, c.retrieval.bm25_score) for c in in_store.trace.candidates] == [
            (c.unit_id, c.retrieval.bm25_score) for c in by_itself.trace.candidates
        ]
        detail = dict(next(st for st in in_store.trace.stages if st.stage == "retrieval").detail)
        assert detail["scope_units"] == "10"
        # 110 of the 120 units are others' and write the same words: the unscoped lexical list's
        # out-of-scope hits are counted, never pooled
        assert 0 < int(detail["out_of_scope_skipped"]) <= EngineConfig().lexical_k * 2
    unscoped = select(mini_request("C2"), store, EngineConfig(scope_at_retrieval=False))
    assert any(c.project != "alpha" for c in unscoped.trace.candidates)


def test_a_scoped_search_fuses_its_lists_cut_at_the_pool_size():
    # a project of 30 units searched 30 deep puts every unit in the lexical list, so the fusion
    # would rank down to the scope's last unit; a scoped list is as deep as the pool it fills
    rng = random.Random(7)
    words = ["baseline", "retrieval", "mechanism", *(f"w{k}" for k in range(40))]
    units = [
        mk(f"{p}-u{i:02d}", " ".join(rng.choice(words) for _ in range(rng.randint(6, 14))),
           "result", project=p, age=rng.randint(1, 40))
        for p in ("alpha", "other")
        for i in range(30)
    ]
    store = CorpusIndex.build(units, hash_vectors([u.text for u in units]))
    query = "Does the mechanism beat the retrieval baseline?"
    vector = tuple(hash_vectors([query])[0].tolist())
    deep = dict(pool_size=10, lexical_k=30, dense_k=30, scope_at_retrieval=True)

    def ranks(config):
        r = select(mini_request("C2", query_vector=vector), store, config)
        return [
            rank
            for c in r.trace.candidates
            for rank in (c.retrieval.bm25_rank, c.retrieval.dense_rank)
            if rank is not None
        ]

    assert ranks(EngineConfig(**deep)) and max(ranks(EngineConfig(**deep))) <= 10
    assert max(ranks(EngineConfig(**deep, scope_depth_pool=False))) > 10
    # the rule is the scope's own: the project alone selects the same bundle
    mine = [u for u in units if u.project == "alpha"]
    alone = CorpusIndex.build(mine, hash_vectors([u.text for u in mine]))
    for condition in ("C2", "C6"):
        request = mini_request(condition, query_vector=vector)
        assert (
            select(request, store, EngineConfig(**deep)).bundle.digest
            == select(request, alone, EngineConfig(**deep)).bundle.digest
        )
