"""The book's Chapter 10 fixture (bm25 only here): the ladder behaves as the chapter reports."""

from statistics import mean

import pytest
from engine_testkit import BOOK, REPO, load_corpus

from selection.engine import CorpusIndex, attribute, select
from selection.engine.explain import FUNNEL_STAGES, loss_funnel, trace_outcomes
from selection.engine.metrics import overlap, score_bundle

pytestmark = pytest.mark.skipif(
    not (BOOK / "units.jsonl").exists(), reason="book-ch10 corpus not present"
)


@pytest.fixture(scope="module")
def book():
    corpus = load_corpus(BOOK)
    index = CorpusIndex.build(corpus.units)
    tasks = {t.id: t for t in corpus.tasks}
    cache = {}

    def run(task_id, condition):
        key = (task_id, condition)
        if key not in cache:
            cache[key] = select(corpus.request(tasks[task_id], condition), index)
        return cache[key]

    def scores(condition):
        units = {u.id: u for u in corpus.units}
        out = {}
        for tid, t in tasks.items():
            out[tid] = score_bundle(
                run(tid, condition).bundle,
                t.ledger,
                project_of={k: u.project for k, u in units.items()},
                echo_of={k: u.echo_of for k, u in units.items()},
                scope=corpus.frames[t.project].scope_set,
            )
        return out

    return corpus, index, tasks, run, scores


def ids(result):
    return result.bundle.unit_ids()


def test_query_only_returns_the_same_bundle_under_both_objectives_and_the_work_frame_separates_them(
    book,
):
    _, _, _, run, _ = book
    for condition in ("C0", "C1", "C2"):
        assert (
            run("t1-publication", condition).bundle.digest
            == run("t1-architecture", condition).bundle.digest
        )
    assert overlap(ids(run("t1-publication", "C4")), ids(run("t1-architecture", "C4"))) < 0.1
    assert overlap(ids(run("t1-publication", "C6")), ids(run("t1-architecture", "C6"))) < 0.1


def test_open_loops_are_admitted_for_the_release_sweep_only(book):
    _, _, _, run, _ = book
    loops = lambda r: [u for u in ids(r) if u.startswith("mb-loop-")]  # noqa: E731
    assert loops(run("t7-release", "C0")) == [] and loops(run("t7-publication", "C0")) == []
    assert len(loops(run("t7-release", "C4"))) >= 2
    assert loops(run("t7-publication", "C4")) == []


def test_scope_removes_leakage_and_c5_removes_harmful_stale_evidence(book):
    _, _, _, run, scores = book
    assert mean(s["leakage"] for s in scores("C0").values()) > 0.1
    for condition in ("C2", "C3", "C4", "C5", "C6"):
        assert all(s["leakage"] == 0.0 for s in scores(condition).values())
    assert "mb-stale-sqlite" in ids(run("t4-current-vs-stale", "C4"))
    for condition in ("C5", "C6"):
        assert all(s["harmful_admission"] == 0.0 for s in scores(condition).values())
        stale = run("t4-current-vs-stale", condition).trace.candidate("mb-stale-sqlite")
        assert stale.reason_code == "SUPERSEDED_SUCCESSOR_AVAILABLE"
        assert "mb-impl-postgres" in ids(run("t4-current-vs-stale", condition))


def test_the_ladder_shape(book):
    _, _, _, _, scores = book
    recall = {
        c: mean(s["must_include_recall"] for s in scores(c).values())
        for c in ("C0", "C2", "C3", "C4", "CO")
    }
    assert recall["C3"] < recall["C2"]  # the project frame alone, blind to the work, is worse
    assert recall["C4"] > recall["C0"] + 0.1  # the work frame is where the improvement is
    assert recall["CO"] == 1.0
    assert mean(s["precision"] for s in scores("CO").values()) == 1.0
    assert all(s["tokens"] <= 1500 for c in ("C0", "C4", "C6", "CO") for s in scores(c).values())


def test_c6_folds_the_planning_echoes_into_the_rule_they_restate(book):
    _, _, _, run, _ = book
    r = run("t6-echo-coalescing", "C6")
    item = next(i for i in r.bundle.items if i.sources[0] == "mb-method-earn")
    assert len(item.sources) >= 3 and all(s.startswith("mb-echo-") for s in item.sources[1:])
    assert all(i.sources for i in r.bundle.items)


def test_attribution_names_the_books_two_surviving_failures(book):
    _, index, tasks, run, _ = book
    arch = attribute(
        run("t1-architecture", "C6").trace, tasks["t1-architecture"].ledger, index.position
    )
    assert arch.code_of("mb-ch10-experiment-pending") == "E3"
    impl = attribute(
        run("t2-memory-book", "C6").trace, tasks["t2-memory-book"].ledger, index.position
    )
    assert impl.code_of("mb-contract-q6") == "E2"


def test_context_lab_fixture_selects_at_every_condition_when_present():
    path = REPO / "fixtures" / "context-lab"
    if not (path / "units.jsonl").exists():
        pytest.skip("fixtures/context-lab not present")
    corpus = load_corpus(path)
    index = CorpusIndex.build(corpus.units)
    for task in corpus.tasks:
        for condition in ("C0", "C3", "C6", "CO"):
            r = select(corpus.request(task, condition), index)
            assert r.bundle.tokens <= task.budget
            assert {c.disposition for c in r.trace.candidates} <= {
                "admitted",
                "folded",
                "rejected",
                "budget_omitted",
            }


@pytest.mark.parametrize("condition", ["C0", "C3", "C4", "C6"])
def test_the_loss_funnel_and_the_attribution_place_every_missed_unit_alike(book, condition):
    # both read missed_code(): a MUST unit's funnel stage is the stage of its E-code, task by task
    _, index, tasks, run, _ = book
    code_of_stage = {key: code for key, code, _ in FUNNEL_STAGES}
    ledger_missed = 0
    for task_id, task in tasks.items():
        trace = run(task_id, condition).trace
        attributed = {
            e.unit_id: e.code for e in attribute(trace, task.ledger, index.position).units
            if e.label == "MUST"
        }
        funnel = loss_funnel(trace_outcomes(trace.candidates), task.ledger, index.position)
        placed = {uid: code_of_stage[stage] for uid, stage in funnel.units if code_of_stage[stage]}
        assert placed == attributed, task_id
        ledger_missed += funnel.lost
    assert ledger_missed > 0  # the comparison saw misses, not only admitted units
