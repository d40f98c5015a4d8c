"""The persisted engine index: a fresh process reads it instead of rebuilding, selects exactly as a
rebuilt index would, and never serves an index whose rows have changed since it was written."""

from __future__ import annotations

import pytest
from django.test import override_settings

from selection import index_cache, store
from selection.engine.index import CorpusIndex
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
    assert after != before  # the old file is gone, the new fingerprint written


def test_a_torn_file_is_rebuilt_not_served(cached_lab, tmp_path, caplog):
    cached_lab.select()
    [name] = _files(tmp_path)
    (tmp_path / "index-cache" / name).write_bytes(b"\x80\x05not a pickle")
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
