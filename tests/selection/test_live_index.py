"""The index that follows writes: a selection over base + delta is bit-identical (bundle digest and
whole trace) to one over an index rebuilt from the rows at the same memory sequence, now and as of
any earlier sequence; an interrupted merge leaves the old base and the delta serving the same."""

from __future__ import annotations

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selection.engine.index import CorpusIndex
from selection.engine.types import WorkFrame
from selection.memory import index_cache, live_index, store
from selection.serving.selections import SelectionInputs, frame_for, selection_run

from .memory_kit import (
    loop_close,
    sequence_of,
    status_set,
    trace_digest,
    unit_create,
    unit_erase,
    unit_supersede,
    vector_of,
)

WORDS = (
    "cache",
    "deploy",
    "schema",
    "retry",
    "queue",
    "index",
    "merge",
    "token",
    "vector",
    "lease",
    "shard",
    "audit",
    "backoff",
    "budget",
    "frame",
)
QUERIES = ("cache deploy retry", "index merge vector schema", "audit lease budget frame")
_counter = [0]


def _text(rng_words) -> str:
    return " ".join(rng_words)


def select(project, index, query: str):
    _, frame = frame_for(project)
    inputs = SelectionInputs(
        project_frame=frame,
        work_frame=WorkFrame(objective="keep the index exact"),
        query=query,
        budget_tokens=300,
        condition="C6",
        query_vector=tuple(vector_of(query)),
        objective_vector=tuple(vector_of("keep the index exact")),
    )
    return selection_run(inputs, index)


def assert_same(project, live, rebuilt):
    assert live.digest == rebuilt.digest
    assert len(live) == len(rebuilt)
    for query in QUERIES:
        a, b = select(project, live, query), select(project, rebuilt, query)
        assert a.bundle.digest == b.bundle.digest, query
        assert trace_digest(a) == trace_digest(b), query


def _fresh(make_project):
    _counter[0] += 1
    project = make_project(f"live{_counter[0]}")
    live_index.forget(project.corpus_id)
    return project


write = st.one_of(
    st.tuples(
        st.just("create"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), st.integers(0, 40), st.booleans()
    ),
    st.tuples(st.just("supersede"), st.integers(0, 10_000), st.lists(st.sampled_from(WORDS), min_size=1, max_size=8)),
    st.tuples(st.just("erase"), st.integers(0, 10_000)),
    st.tuples(st.just("close"), st.integers(0, 10_000)),
    st.tuples(st.just("decline"), st.integers(0, 10_000)),
)


def _apply(project, units: list, op, step: int) -> None:
    kind = op[0]
    if kind == "create":
        units.append(unit_create(project, f"u-{step:04d}-{op[2]}", _text(op[1]), day=op[2], open_loop=op[3]))
    elif units:
        target = units[op[1] % len(units)]
        if kind == "supersede":
            units.append(unit_supersede(project, target, f"s-{step:04d}", _text(op[2]), day=50 + step))
        elif kind == "erase":
            unit_erase(target)
        elif kind == "close":
            loop_close(target)
        elif kind == "decline":
            status_set(target, "declined")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    first=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), min_size=1, max_size=12),
    writes=st.lists(write, min_size=1, max_size=14),
    cut=st.integers(0, 14),
)
def test_base_plus_delta_selects_exactly_as_a_rebuild_at_every_sequence(make_project, tmp_path, first, writes, cut):
    with override_settings(FG_INDEX_CACHE_DIR=str(tmp_path / "cache"), FG_LIVE_MERGE_AT=5):
        project = _fresh(make_project)
        units = [unit_create(project, f"a-{i:03d}", _text(words), day=i) for i, words in enumerate(first)]
        store.corpus_index(project.corpus_id)  # the base, at the first units
        middle = None
        for step, op in enumerate(writes):
            _apply(project, units, op, step)
            if step == cut:
                middle = sequence_of(project.corpus_id)
                assert_same(project, store.corpus_index(project.corpus_id), live_index.rebuilt_index(project.corpus_id))
        now = store.corpus_index(project.corpus_id)
        assert now.memory_sequence == sequence_of(project.corpus_id)
        assert_same(project, now, live_index.rebuilt_index(project.corpus_id))
        # and against the index as the rows loader builds it (store.load_units, position order)
        assert_same(project, now, CorpusIndex.build(*store.load_units(project.corpus_id)))
        if middle is not None:
            past = store.corpus_index(project.corpus_id, as_of=middle)
            assert past.memory_sequence == middle
            assert_same(project, past, live_index.rebuilt_index(project.corpus_id, as_of=middle))
        # a fresh process: the base from the file (merged or first), the delta from the rows
        live_index.forget(project.corpus_id)
        assert_same(project, store.corpus_index(project.corpus_id), live_index.rebuilt_index(project.corpus_id))


def test_a_write_is_in_the_next_selection_and_its_trace_records_the_sequence(make_project, tmp_path):
    with override_settings(FG_INDEX_CACHE_DIR=str(tmp_path / "cache")):
        project = _fresh(make_project)
        unit_create(project, "a-1", "cache deploy retry")
        before = store.corpus_index(project.corpus_id)
        unit_create(project, "a-2", "index merge vector schema")
        after = store.corpus_index(project.corpus_id)
        assert before.unit("a-2") is None and after.unit("a-2") is not None
        assert after.memory_sequence == before.memory_sequence + 1 == sequence_of(project.corpus_id)
        held = live_index.held(project.corpus_id)
        assert held.base is before  # no rebuild: the base stays, the delta holds the write


def test_as_of_a_sequence_shows_memory_as_it_was(make_project, tmp_path):
    with override_settings(FG_INDEX_CACHE_DIR=str(tmp_path / "cache")):
        project = _fresh(make_project)
        old = unit_create(project, "a-1", "cache deploy retry")
        then = sequence_of(project.corpus_id)
        unit_supersede(project, old, "a-2", "cache deploy retry with backoff", day=3)
        unit_erase(old)
        past = store.corpus_index(project.corpus_id, as_of=then)
        assert [u.id for u in past.units] == ["a-1"]
        assert past.unit("a-1").valid_to is None  # its validity closed later
        assert past.unit("a-1").text.startswith("[erased")  # erased text stays erased at every sequence
        now = store.corpus_index(project.corpus_id)
        assert [u.id for u in now.units] == ["a-1", "a-2"] and now.unit("a-1").valid_to is not None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_interrupted_merge_leaves_the_old_base_and_delta_serving_the_same(make_project, tmp_path, monkeypatch):
    with override_settings(FG_INDEX_CACHE_DIR=str(tmp_path / "cache"), FG_LIVE_MERGE_AT=3):
        project = _fresh(make_project)
        for i in range(4):
            unit_create(project, f"a-{i}", f"cache deploy {WORDS[i]}")
        store.corpus_index(project.corpus_id)
        [old_base] = sorted(p.name for p in (tmp_path / "cache").glob("*.index"))

        real = index_cache.write_index

        def torn(path, index):  # the process dies with the new base half written
            real(path, index)
            (path / index_cache.META).unlink()
            raise SystemExit("killed mid-merge")

        monkeypatch.setattr(index_cache, "write_index", torn)
        for i in range(4):
            unit_create(project, f"b-{i}", f"index merge {WORDS[i + 4]}")
        served = store.corpus_index(project.corpus_id)
        live_index.held(project.corpus_id).merging.join()
        assert sorted(p.name for p in (tmp_path / "cache").glob("*.index")) == [old_base]
        monkeypatch.setattr(index_cache, "write_index", real)
        live_index.forget(project.corpus_id)  # a fresh process: the old base, the delta from rows
        again = store.corpus_index(project.corpus_id)
        assert live_index.held(project.corpus_id).base_sequence < again.memory_sequence
        assert_same(project, again, served)
        assert_same(project, again, live_index.rebuilt_index(project.corpus_id))


def test_a_merge_writes_a_base_a_fresh_process_reads_with_no_delta(make_project, tmp_path, monkeypatch):
    with override_settings(FG_INDEX_CACHE_DIR=str(tmp_path / "cache"), FG_LIVE_MERGE_AT=2):
        project = _fresh(make_project)
        unit_create(project, "a-0", "cache deploy")
        store.corpus_index(project.corpus_id)
        for i in range(3):
            unit_create(project, f"b-{i}", f"index merge {WORDS[i]}")
        served = store.corpus_index(project.corpus_id)
        live_index.held(project.corpus_id).merging.join()
        [name] = [p.name for p in (tmp_path / "cache").glob("*.index")]
        assert name.endswith(f"-s{served.memory_sequence}.index")
        live_index.forget(project.corpus_id)
        again = store.corpus_index(project.corpus_id)
        assert live_index.held(project.corpus_id).base_sequence == served.memory_sequence
        assert_same(project, again, served)


@pytest.mark.parametrize("status", ["candidate"])
def test_a_unit_that_is_not_active_is_never_in_the_index(make_project, tmp_path, status):
    with override_settings(FG_INDEX_CACHE_DIR=str(tmp_path / "cache")):
        project = _fresh(make_project)
        unit = unit_create(project, "a-1", "cache deploy retry")
        unit_create(project, "a-2", "index merge")
        status_set(unit, status)
        assert store.corpus_index(project.corpus_id).unit("a-1") is None
        status_set(unit, "active")
        assert store.corpus_index(project.corpus_id).unit("a-1") is not None
