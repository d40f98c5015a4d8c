"""Metrics on hand-computed cases and failure attribution E0..E6."""

from dataclasses import replace

import pytest
from engine_testkit import ALPHA, mini_request, mini_units, mini_work, mk

from selection.engine import CorpusIndex, EngineConfig, attribute, select
from selection.engine import metrics as m

LEDGER = {
    "m1": "MUST",
    "m2": "MUST",
    "s1": "SHOULD",
    "h1": "HARMFUL",
    "o1": "OPTIONAL",
    "d1": "DISTRACTOR",
}
ADMITTED = ["m1", "s1", "h1", "x1", "e1"]  # x1 and e1 are unlabelled: DISTRACTOR


def test_recall_and_precision_by_hand():
    assert m.must_include_recall(ADMITTED, LEDGER) == 0.5
    assert m.must_include_recall([], {"s1": "SHOULD"}) == 1.0  # no MUST: nothing to miss
    assert m.precision(ADMITTED, LEDGER) == 2 / 5
    assert m.precision([], LEDGER) == 0.0


def test_leakage_harmful_redundancy_by_hand():
    project = {"m1": "alpha", "s1": "alpha", "h1": "beta", "x1": "gamma", "e1": "alpha"}
    assert m.leakage(ADMITTED, project, {"alpha"}) == 2 / 5
    assert m.leakage(ADMITTED, project, {"alpha", "beta", "gamma"}) == 0.0
    assert m.harmful_admission(ADMITTED, LEDGER) == 1 / 5
    echo = {"e1": "m1", "x1": "m2"}  # x1 restates m2, which is not admitted: not redundant
    assert m.redundancy(ADMITTED, echo) == 1 / 5
    assert (
        m.redundancy([], echo)
        == m.leakage([], project, {"alpha"})
        == m.harmful_admission([], LEDGER)
        == 0.0
    )


def test_overlap_is_jaccard_of_admitted_sets():
    assert m.overlap(["a", "b", "c"], ["b", "c", "d"]) == 2 / 4
    assert m.overlap(["a"], ["a"]) == 1.0 and m.overlap(["a"], ["b"]) == 0.0
    assert m.overlap([], []) == 1.0


def test_folded_units_count_as_admitted_and_tokens_are_the_rendered_bundles():
    index = CorpusIndex.build(mini_units())
    r = select(mini_request("C6"), index)
    units = {u.id: u for u in mini_units()}
    ledger = {"a-echo1": "MUST", "a-rule": "MUST"}
    scores = m.score_bundle(
        r.bundle,
        ledger,
        project_of={k: u.project for k, u in units.items()},
        echo_of={k: u.echo_of for k, u in units.items()},
        scope=ALPHA.scope_set,
    )
    assert scores["must_include_recall"] == 1.0  # a-echo1 is folded into a-rule's item
    assert scores["redundancy"] == pytest.approx(2 / len(r.bundle.unit_ids()))
    assert scores["tokens"] == r.bundle.tokens == -(-len(r.bundle.rendered) // 4)
    assert list(scores) == [
        "must_include_recall",
        "precision",
        "leakage",
        "harmful_admission",
        "redundancy",
        "tokens",
    ]


# --- attribution ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def index():
    return CorpusIndex.build(mini_units() + [mk("a-hidden", "zebra quokka", "gossip")])


def codes(result, ledger, index, **kw):
    att = attribute(result.trace, ledger, index.position, **kw)
    return {e.unit_id: e.code for e in att.units}, att


def test_e0_absent_e1_never_surfaced_e2_ineligible(index):
    r = select(
        mini_request("C5"), index
    )  # C5: the stale SQLite unit is not admitted, so no E4 here
    got, att = codes(
        r, {"nowhere": "MUST", "a-hidden": "MUST", "a-sqlite": "MUST", "a-rule": "MUST"}, index
    )
    assert got == {
        "nowhere": "E0",
        "a-hidden": "E1",
        "a-sqlite": "E2",
    }  # a-rule was admitted: no code
    assert att.codes == ("E0", "E1", "E2")
    stale = next(e for e in att.units if e.unit_id == "a-sqlite")
    assert stale.reason_code == "SUPERSEDED_SUCCESSOR_AVAILABLE" and stale.stage == "eligibility"
    # an out-of-scope unit is ruled out at eligibility (E2), or, when retrieval is scoped, never
    # takes a place in the pool (E1)
    assert codes(r, {"b-rule": "MUST"}, index)[0] == {"b-rule": "E2"}
    scoped = select(mini_request("C5"), index, EngineConfig(scope_at_retrieval=True))
    assert codes(scoped, {"b-rule": "MUST"}, index)[0] == {"b-rule": "E1"}


def test_e3_lost_to_the_budget(index):
    full = select(mini_request("C5"), index)
    last = full.bundle.items[-1].sources[0]
    budget = sum(i.tokens for i in full.bundle.items[:-1])
    r = select(mini_request("C5", budget=budget), index)
    got, _ = codes(r, {last: "MUST"}, index)
    assert got == {last: "E3"}


def test_e4_harmful_or_superseded_evidence_admitted(index):
    query = "SQLite tables baseline store"
    c0 = select(mini_request("C0", query=query), index)
    got, _ = codes(c0, {"a-sqlite": "HARMFUL"}, index)
    assert got == {"a-sqlite": "E4"}
    got, att = codes(c0, {}, index)  # unlabelled, but superseded as of the standpoint
    assert got == {"a-sqlite": "E4"} and att.units[0].label == "DISTRACTOR"
    c5 = select(mini_request("C5", query=query), index)
    assert codes(c5, {"a-sqlite": "HARMFUL"}, index)[0] == {}


def test_a_folded_must_unit_counts_as_recalled_not_e5(index):
    r = select(mini_request("C6"), index)
    assert rec_of(r, "a-echo1").disposition == "folded"
    got, _ = codes(r, {"a-echo1": "MUST"}, index)
    assert got == {}  # its id joined an admitted item with its source: the metric counts it
    assert codes(select(mini_request("C5"), index), {"a-echo1": "MUST"}, index)[0] == {}


def near_duplicates():
    """Two near-restatements: at a wide budget one folds into the other's item; at a budget that
    fits one alone, the second is rejected as redundant. (index, wide, tight, the rejected id)"""
    units = [
        mk("a-one", "the retrieval baseline must be beaten at a matched budget", "rule"),
        mk("a-two", "the retrieval baseline must be beaten at a matched budget too", "rule"),
    ]
    idx = CorpusIndex.build(units)
    full = select(mini_request("C6", query="retrieval baseline budget"), idx)
    lone = -(-len(full.bundle.items[0].rendered.replace(", a-two", "").replace(", a-one", "")) // 4)
    tight = select(mini_request("C6", query="retrieval baseline budget", budget=lone), idx)
    lost = next(c.unit_id for c in tight.trace.candidates if c.reason_code == "REDUNDANT_WITH_ADMITTED")
    return idx, full, tight, lost


def test_e5_redundancy_rejection():
    idx, _, r, lost = near_duplicates()
    assert attribute(r.trace, {lost: "MUST"}, idx.position).units[0].code == "E5"


def test_missed_should_units_are_attributed_too(index):
    r = select(mini_request("C5"), index)
    att = attribute(r.trace, {"a-hidden": "SHOULD", "a-sqlite": "SHOULD", "a-rule": "MUST"}, index.position)
    assert {(e.unit_id, e.label, e.code) for e in att.units} == {
        ("a-hidden", "SHOULD", "E1"),
        ("a-sqlite", "SHOULD", "E2"),
    }
    # SHOULD misses do not hide a reader failure on a bundle whose MUST evidence was present
    failed = attribute(r.trace, {"a-hidden": "SHOULD", "a-rule": "MUST"}, index.position, reader_failed=True)
    assert "E6" in failed.codes


def rec_of(result, unit_id):
    return next(c for c in result.trace.candidates if c.unit_id == unit_id)


def test_e6_only_when_the_reader_failed_on_good_context(index):
    r = select(mini_request("C5"), index)
    assert codes(r, {"a-rule": "MUST"}, index, reader_failed=True)[1].codes == ("E6",)
    assert codes(r, {"a-rule": "MUST"}, index, reader_failed=False)[1].codes == ()
    assert codes(r, {"a-hidden": "MUST"}, index, reader_failed=True)[1].codes == ("E1",)
    # a stale unit reached the model: the context was not good, whatever the ledger calls the unit
    c0 = select(mini_request("C0", query="SQLite tables baseline store"), index)
    for label in ("SHOULD", "MUST", "HARMFUL"):
        att = codes(c0, {"a-sqlite": label}, index, reader_failed=True)[1]
        assert att.codes == ("E4",), label


def test_attribution_round_trips(index):
    from selection.engine.attribution import Attribution

    r = select(mini_request("C2"), index)
    att = attribute(r.trace, {"nowhere": "MUST", "b-rule": "MUST"}, index.position)
    assert Attribution.from_dict(att.as_dict()) == att
    assert replace(att, codes=()) != att


# --- recall at every stage -----------------------------------------------------------------------


def stages_of(result, ledger, index):
    from selection.engine.attribution import must_loss_stages

    tokens = {i.item_id: i.tokens for i in result.bundle.items}
    return must_loss_stages(result.trace, ledger, index.position, tokens)


def test_loss_stages_name_the_stage_that_lost_each_must_unit(index):
    r = select(mini_request("C5"), index)
    got = stages_of(
        r, {"nowhere": "MUST", "a-hidden": "MUST", "a-sqlite": "MUST", "a-rule": "MUST"}, index
    )
    assert got == {
        "nowhere": "absent",
        "a-hidden": "pool",
        "a-sqlite": "eligibility",
        "a-rule": "recalled",
    }
    folded = select(mini_request("C6"), index)
    assert stages_of(folded, {"a-echo1": "MUST"}, index) == {"a-echo1": "recalled"}


def test_a_budget_omission_is_ranking_when_filler_took_the_room_and_budget_when_evidence_did(index):
    full = select(mini_request("C5"), index)
    last = full.bundle.items[-1].sources[0]
    budget = sum(i.tokens for i in full.bundle.items[:-1])
    r = select(mini_request("C5", budget=budget), index)
    assert stages_of(r, {last: "MUST"}, index) == {last: "ranking"}  # the rest is filler
    ahead = {i.sources[0]: "SHOULD" for i in r.bundle.items}  # everything ahead of it is wanted
    assert stages_of(r, {last: "MUST", **ahead}, index)[last] == "budget"


def test_a_unit_the_stop_rule_ended_is_lost_at_stop_and_a_redundant_one_at_redundancy(index):
    from selection.engine.types import AdmissionPolicy

    strict = replace(ALPHA, admission=AdmissionPolicy(rule="relative", floor=0.95, unlisted=0))
    r = select(mini_request("C6", work=mini_work("review"), frame=strict), index)
    stopped = sorted(c.unit_id for c in r.trace.candidates if c.reason_code == "ADMISSION_STOPPED")
    assert stopped, "a 0.95 floor stops some of the review's evidence"
    assert set(stages_of(r, dict.fromkeys(stopped, "MUST"), index).values()) == {"stop"}
    # the same units with no stop rule at all are not lost there
    loose = replace(ALPHA, admission=AdmissionPolicy(rule="none"))
    r = select(mini_request("C6", work=mini_work("review"), frame=loose), index)
    assert "stop" not in stages_of(r, dict.fromkeys(stopped, "MUST"), index).values()

    idx, full, tight, lost = near_duplicates()
    assert stages_of(tight, {lost: "MUST"}, idx) == {lost: "redundancy"}
    assert stages_of(full, {lost: "MUST"}, idx) == {lost: "recalled"}  # folded with its source


def test_jaccard_columns_from_a_vocabulary_mark_are_the_sorted_distinct_ids():
    """The redundancy signal's term columns are the same whether read off a mark per vocabulary
    entry (a small vocabulary) or a sort (a large one)."""
    import numpy as np

    from selection.engine.signals import _column_ids, _local_ids

    rng = np.random.default_rng(3)
    terms = rng.integers(0, 500, size=300).astype(np.int32)
    for vocabulary in (500, 16 * 300 + 1):
        count, columns = _column_ids(terms, vocabulary)
        expected_count, expected = _local_ids(terms)
        assert count == expected_count == np.unique(terms).size
        assert columns.tolist() == expected.tolist()
