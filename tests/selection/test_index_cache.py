"""The persisted engine index: a fresh process reads it instead of rebuilding, selects exactly as a
rebuilt index would, and never serves an index whose rows have changed since it was written."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import override_settings

from selection.engine.index import CorpusIndex
from selection.memory import index_cache, store
from selection.models import MemoryUnit

from .test_traces import Lab, embedding_cache  # noqa: F401 (the module's real-vector cache)


@pytest.fixture
def cached_lab(db, tmp_path):
    with override_settings(FG_INDEX_CACHE_DIR=str(tmp_path / "index-cache")):
        lab = Lab(tmp_path)
        store.forget_index(lab.corpus.pk)
        yield lab
        store.forget_index(lab.corpus.pk)


def _files(tmp_path):
    return sorted(p.name for p in (tmp_path / "index-cache").glob("*.index"))


def _no_rebuild(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the index was rebuilt from rows")

    monkeypatch.setattr(CorpusIndex, "build", refuse)


def test_a_fresh_process_reads_the_index_file_and_selects_the_same_bundle(cached_lab, tmp_path,
                                                                          monkeypatch):
    first = cached_lab.select(dense=True)
    assert len(_files(tmp_path)) == 1
    store.forget_index(cached_lab.corpus.pk)  # what a new process starts with
    _no_rebuild(monkeypatch)
    second = cached_lab.select(dense=True)
    assert second.result.bundle.digest == first.result.bundle.digest
    assert second.result.bundle.unit_ids() == first.result.bundle.unit_ids()
    assert second.result.trace.as_dict() == first.result.trace.as_dict()


def test_a_changed_unit_row_is_never_served_from_a_stale_file(cached_lab, tmp_path, monkeypatch):
    cached_lab.select()
    [before] = _files(tmp_path)
    unit = MemoryUnit.objects.filter(corpus=cached_lab.corpus).order_by("id").first()
    MemoryUnit.objects.filter(pk=unit.pk).update(text="rewritten by an erasure")
    store.forget_index(cached_lab.corpus.pk)
    index = store.corpus_index(cached_lab.corpus.pk)
    assert index.unit(unit.uid).text == "rewritten by an erasure"
    [after] = _files(tmp_path)
    # the base at the same sequence is written again, from the rows as they are
    assert index_cache.read_index(tmp_path / "index-cache" / after).unit(unit.uid).text == "rewritten by an erasure"
    assert before


def test_a_torn_file_is_rebuilt_not_served(cached_lab, tmp_path, caplog):
    cached_lab.select()
    [name] = _files(tmp_path)
    (tmp_path / "index-cache" / name / index_cache.SKELETON).write_bytes(b"\x80\x05not a pickle")
    store.forget_index(cached_lab.corpus.pk)
    index = store.corpus_index(cached_lab.corpus.pk)
    assert len(index) == MemoryUnit.objects.filter(corpus=cached_lab.corpus).count()
    assert "unreadable" in caplog.text


def test_an_empty_setting_turns_the_cache_off(db, tmp_path):
    with override_settings(FG_INDEX_CACHE_DIR=""):
        lab = Lab(tmp_path)
        store.forget_index(lab.corpus.pk)
        lab.select()
        assert index_cache.cache_dir() is None
    assert not (tmp_path / "index-cache").exists()


# the persisted format itself, on a generated corpus large enough for the compact IVF searcher


@pytest.fixture(scope="module")
def generated():
    from bench.generator import generate

    return generate(1500, seed=11, tasks=12)


def _request(bench, task, condition="C6"):
    from selection.engine import SelectionRequest, WorkFrame

    return SelectionRequest(
        project_frame=bench.frames[task.project],
        work_frame=WorkFrame(objective=task.objective, work_type=task.work_type),
        query=task.query, budget_tokens=task.budget_tokens, condition=condition,
        query_vector=task.query_vector, objective_vector=task.objective_vector,
    )


def test_a_loaded_compact_index_selects_the_bundles_of_a_freshly_built_one(generated, tmp_path):
    from selection.engine import select
    from selection.engine.index import IvfSearcher

    built = CorpusIndex.build(generated.units, generated.vectors, dense_threshold=1000)
    assert isinstance(built.dense, IvfSearcher)
    index_cache.write_index(tmp_path / "x.index", built)
    loaded = index_cache.read_index(tmp_path / "x.index")
    # the arrays are mapped from the file, not copied into the process
    assert loaded.dense.matrix.base is not None and not loaded.dense.matrix.flags.owndata
    assert loaded.dense.codes.dtype == np.int8 and loaded.dense.matrix.dtype == np.float32
    fresh = CorpusIndex.build(generated.units, generated.vectors, dense_threshold=1000)
    for task in generated.tasks:
        for condition in ("C0", "C6"):
            request = _request(generated, task, condition)
            a, b = select(request, fresh), select(request, loaded)
            assert a.bundle.digest == b.bundle.digest and a.bundle.unit_ids() == b.bundle.unit_ids()
            assert a.trace.as_dict() == b.trace.as_dict()


def test_every_array_of_the_index_is_persisted_whatever_holds_it(generated, tmp_path):
    index = CorpusIndex.build(generated.units[:300], generated.vectors[:300])
    # what a later change might add: an array attribute, a list and a dict of arrays
    index.bm25.block_max = np.arange(7, dtype=np.float64) / 3
    index.bm25.blocks = [np.arange(3, dtype=np.int16), np.zeros((2, 2), dtype=np.float32)]
    index.dense.extra = {"a": np.ones(5, dtype=np.uint8)}
    index_cache.write_index(tmp_path / "y.index", index)
    loaded = index_cache.read_index(tmp_path / "y.index")
    assert np.array_equal(loaded.bm25.block_max, index.bm25.block_max)
    assert loaded.bm25.block_max.dtype == np.float64 and not loaded.bm25.block_max.flags.owndata
    assert [b.tolist() for b in loaded.bm25.blocks] == [b.tolist() for b in index.bm25.blocks]
    assert loaded.bm25.blocks[1].dtype == np.float32
    assert loaded.dense.extra["a"].tolist() == [1] * 5
    assert all(np.array_equal(a, b) for a, b in zip(loaded.bm25.postings, index.bm25.postings, strict=True))
    assert np.array_equal(loaded.terms, index.terms) and np.array_equal(loaded.dense.matrix, index.dense.matrix)
    assert tuple(loaded.units) == index.units and loaded.digest == index.digest


def test_a_torn_or_foreign_directory_is_refused(generated, tmp_path):
    index = CorpusIndex.build(generated.units[:200], generated.vectors[:200])
    path = tmp_path / "z.index"
    index_cache.write_index(path, index)
    arrays = (path / index_cache.ARRAYS).read_bytes()
    (path / index_cache.ARRAYS).write_bytes(arrays[:-10])
    with pytest.raises(ValueError, match="arrays.bin holds"):
        index_cache.read_index(path)
    (path / index_cache.ARRAYS).write_bytes(arrays)
    (path / index_cache.META).write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="not an index"):
        index_cache.read_index(path)
