"""BM25 against rank_bm25, the tokeniser, top-k tie handling, dense search and RRF."""

import json
from pathlib import Path

import numpy as np
import pytest
from engine_testkit import BOOK, REPO, hash_vectors
from rank_bm25 import BM25Okapi

from selection.engine.index import BM25Index, CorpusIndex, NumpyExactSearcher, tokenise, top_k
from selection.engine.search import rrf
from selection.engine.types import Unit

SMALL = [
    "The quick brown fox jumps over the lazy dog",
    "the the the baseline baseline retrieval",
    "Retrieval-augmented generation: the baseline, measured.",
    "Ünïcode wörds and ÉCOLE stay words; snake_case_names too",
    "",
    "the dog",
    "budget budget budget the",
]
QUERIES = [
    # "the" is in more than half the docs: its idf is floored at epsilon * average idf
    "the baseline",
    "baseline baseline retrieval",  # repeated query terms count twice, as in rank_bm25
    "école ünïcode",
    "absent words only",
    "",
    "dog the fox budget",
]


def assert_identical(texts, queries):
    docs = [tokenise(t) for t in texts]
    reference = BM25Okapi(docs)
    ours = BM25Index(docs)
    for q in queries:
        tokens = tokenise(q)
        expected = reference.get_scores(tokens)
        got = ours.scores(tokens)
        assert got.dtype == expected.dtype
        assert np.array_equal(got, expected), q  # bit-identical, not merely close


def test_tokeniser_lowercases_unicode_words():
    assert tokenise("Ünïcode ÉCOLE, snake_case 3.14 don't") == [
        "ünïcode",
        "école",
        "snake_case",
        "3",
        "14",
        "don",
        "t",
    ]


def test_bm25_matches_rank_bm25_on_small_corpus():
    assert_identical(SMALL, QUERIES)


def test_bm25_matches_rank_bm25_rs_as_well():
    rs = pytest.importorskip("rank_bm25_rs")
    docs = [
        tokenise(t) for t in SMALL if t
    ]  # rank_bm25_rs is a drop-in; compare on the same tokens
    ours = BM25Index(docs)
    other = rs.BM25Okapi(docs)
    for q in QUERIES:
        assert np.array_equal(ours.scores(tokenise(q)), other.get_scores(tokenise(q)))


def _jsonl_texts(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text().splitlines() if line.strip()]


SHIPPED_UNITS = sorted(REPO.glob("fixtures/*/units.jsonl")) + sorted(REPO.glob("fixtures/test/*/units.jsonl"))
CORPORA = SHIPPED_UNITS + (
    [BOOK / "units.jsonl"] if BOOK.exists() else []
)


@pytest.mark.parametrize("path", CORPORA, ids=[p.parent.name for p in CORPORA])
def test_bm25_matches_rank_bm25_on_fixture_texts(path):
    texts = _jsonl_texts(path)
    queries = [
        "What is left to do?",
        "Review Chapter 10 and tell me what we should do with it.",
        "baseline store postgres sqlite",
        texts[0][:80],
        texts[-1][:40],
    ]
    assert_identical(texts, queries)


def test_corpus_index_scores_follow_unit_id_order_whatever_the_input_order():
    units = [Unit(id=f"u{i}", project="p", evidence_class="c", text=t) for i, t in enumerate(SMALL)]
    a = CorpusIndex.build(units)
    b = CorpusIndex.build(list(reversed(units)))
    q = tokenise("the baseline dog")
    assert [u.id for u in a.units] == [u.id for u in b.units] == sorted(u.id for u in units)
    assert np.array_equal(a.bm25.scores(q), b.bm25.scores(q))
    assert np.array_equal(
        a.bm25.scores(q), BM25Okapi([tokenise(u.text) for u in a.units]).get_scores(q)
    )


def test_top_k_breaks_ties_by_position_even_at_the_cut():
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.9, 0.1])
    assert top_k(scores, 3).tolist() == [1, 4, 0]
    assert top_k(scores, 4).tolist() == [1, 4, 0, 2]
    assert top_k(np.array([0.0, -1.0, 2.0]), 5, positive_only=True).tolist() == [2]
    assert top_k(scores, 0).tolist() == []


def test_dense_search_is_exact_cosine_over_normalised_rows():
    vectors = hash_vectors(SMALL[:4] + SMALL[5:])
    searcher = NumpyExactSearcher(vectors * 7.0)  # scaling a row must not change its cosine
    query = vectors[2] * 0.5
    got = searcher.scores(query)
    norms = np.linalg.norm(vectors, axis=1)
    expected = vectors @ query / (norms * np.linalg.norm(query))
    assert np.allclose(got, expected, atol=1e-6)
    assert searcher.top(query, 1).tolist() == [2]
    assert searcher.matrix.dtype == np.float32


@pytest.mark.parametrize("threads", [1, 2])
def test_dense_scan_of_a_query_and_its_objective_has_the_bits_of_one_whole_matrix_product(threads):
    """The exact searcher reads its matrix once for a query and its objective (block by block):
    every cosine has the bits a single matrix-vector product over the whole matrix gives, at one
    BLAS thread or two, so a trace never depends on which way the cosines were computed."""
    from threadpoolctl import threadpool_limits

    from selection.engine.index.dense import SCAN_ROWS, normalise_vector

    rng = np.random.default_rng(5)
    size = 3 * SCAN_ROWS + 77  # a partial last block
    searcher = NumpyExactSearcher(rng.standard_normal((size, 384)).astype(np.float32))
    queries = [rng.standard_normal(384).astype(np.float32) for _ in range(6)]
    with threadpool_limits(limits=1):
        whole = [searcher.matrix @ normalise_vector(q, 384) for q in queries]
    with threadpool_limits(limits=threads):
        for first, second in zip(queries[::2], queries[1::2], strict=True):
            pair = searcher.search_many([first, second], 40)
            for hits, query in zip(pair, (first, second), strict=True):
                expected = whole[next(i for i, q in enumerate(queries) if q is query)]
                assert hits.full.tobytes() == expected.tobytes()
                assert hits.top.tolist() == searcher.search(query, 40).top.tolist()
                assert searcher.scores(query).tobytes() == expected.tobytes()


def test_rrf_sums_reciprocal_ranks_with_k_60_and_breaks_ties_by_key():
    fused = rrf([["a", "b", "c"], ["c", "a"]], k=60)
    assert fused[0] == ("a", 1 / 61 + 1 / 62)
    assert [k for k, _ in fused] == ["a", "c", "b"]
    tie = rrf([["y"], ["x"]])
    assert [k for k, _ in tie] == ["x", "y"]


def _many_projects(projects: int = 12, per_project: int = 6) -> tuple[list[Unit], np.ndarray]:
    """Projects that share one vocabulary: every project writes about the same things."""
    words = "baseline retrieval budget scope store frame trace ledger pool rank".split()
    units = [
        Unit(
            id=f"p{p:02d}-u{i}",
            project=f"p{p:02d}",
            evidence_class="note",
            text=" ".join(words[(p + i + j) % len(words)] for j in range(3 + (p * i) % 5)),
        )
        for p in range(projects)
        for i in range(per_project)
    ]
    return units, hash_vectors([u.text for u in units])


def test_a_scope_is_searched_with_its_own_statistics_as_an_index_of_its_units_alone():
    """Scoped search ranks only the scope's units, with BM25 over the scope's own idf and average
    length: its lists, its fusion and its scores are those of an index of the scope's units alone
    (positions mapped), bit for bit, whether the scope is small (searched by its rows) or large
    (a masked dense scan); out-of-scope hits of the unscoped lexical list are counted."""
    from selection.engine.index import IvfSearcher, scope_bm25, searched_by_rows
    from selection.engine.search import search
    from selection.engine.types import EngineConfig

    units, vectors = _many_projects()
    vector_of = {u.id: v for u, v in zip(units, vectors, strict=True)}
    exact = CorpusIndex.build(units, vectors)
    ivf = CorpusIndex.build(units, vectors, dense_threshold=10)
    assert isinstance(ivf.dense, IvfSearcher)
    config = EngineConfig(lexical_k=4, dense_k=4, pool_size=6)
    query = "baseline retrieval scope"
    tokens, vector = tokenise(query), hash_vectors([query])[0]
    small, large = frozenset({"p03"}), frozenset(f"p{p:02d}" for p in range(6))
    for scope in (small, large):
        rows, mask = exact.scope_rows(scope), exact.scope_mask(scope)
        assert rows.tolist() == np.flatnonzero(mask).tolist()
        assert searched_by_rows(rows, len(exact)) == (scope == small)
        mine = [exact.units[p] for p in rows]
        alone = CorpusIndex.build(mine, np.stack([vector_of[u.id] for u in mine]))
        hits = search(exact, query, vector, config, allowed=mask, rows=rows)
        reference = search(alone, query, vector, config)
        assert hits.searched == rows.size
        assert hits.lexical.tolist() == rows[reference.lexical].tolist()
        assert hits.dense_top.tolist() == rows[reference.dense_top].tolist()
        assert hits.fused == [(int(rows[p]), score) for p, score in reference.fused]
        assert hits.bm25[rows].tolist() == alone.bm25.scores(tokens).tolist()
        # an out-of-scope unit (a pulled successor) is scored on demand with the same statistics
        stats = scope_bm25(exact, rows, mask)
        assert stats.scores_at(stats.tids(tokens), rows).tolist() == hits.bm25[rows].tolist()
        outside = np.flatnonzero(~mask)
        assert hits.bm25.scores(outside).tolist() == stats.scores_at(stats.tids(tokens), outside).tolist()
        # the unscoped lexical list's out-of-scope hits took no place and are counted
        unscoped = exact.bm25.search(tokens, config.lexical_k).top
        assert hits.skipped == frozenset(int(p) for p in unscoped if not mask[p]) != frozenset()
        assert all(mask[p] for p, _ in hits.fused)
    # an approximate searcher is exact over a small scope's rows
    rows, mask = exact.scope_rows(small), exact.scope_mask(small)
    assert search(ivf, query, vector, config, allowed=mask, rows=rows).fused == search(
        exact, query, vector, config, allowed=mask, rows=rows
    ).fused


def test_a_large_scopes_statistics_and_an_uncached_scope_score_as_the_scope_alone(monkeypatch):
    """Past SCOPE_ROWS_MAX units the scope's idf is summed in (first unit, term id) order rather
    than re-tokenising its texts (which can move a floored idf by ulps only), and past
    SCOPE_CACHE_POSTINGS a term's in-scope postings are found again per query: the scores stay
    those of the scope's units alone."""
    from selection.engine.index import scoped

    units, _ = _many_projects()
    store = CorpusIndex.build(units)
    scope = frozenset(f"p{p:02d}" for p in range(5))
    rows, mask = store.scope_rows(scope), store.scope_mask(scope)
    alone = CorpusIndex.build([store.units[p] for p in rows])
    tokens = tokenise("baseline retrieval scope scope pool unknownword")
    expected = alone.bm25.scores(tokens)
    monkeypatch.setattr(scoped, "SCOPE_ROWS_MAX", 0)
    monkeypatch.setattr(scoped, "SCOPE_CACHE_POSTINGS", 0)
    stats = scoped.ScopeBM25(store, rows, mask)
    assert stats.size == rows.size and stats.avgdl == alone.bm25.avgdl
    words = list(alone.bm25.vocab)
    assert len(stats.idf) == len(words)
    assert [stats.idf[store.bm25.vocab[w]] for w in words] == pytest.approx(
        [alone.bm25.idf[alone.bm25.vocab[w]] for w in words], rel=1e-12)
    got = stats.scores(stats.tids(tokens))
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert np.argsort(-got, kind="stable").tolist() == np.argsort(-expected, kind="stable").tolist()
    assert stats.scores(stats.tids(tokens)).tolist() == got.tolist()  # nothing cached, same bits


def test_dense_hits_scores_of_many_positions_are_score_of_each():
    """A pull asks an approximate searcher's hits for many cosines at once: each is the cosine
    score() gives for that position alone, known or computed."""
    from selection.engine.index.ivf import IvfSearcher

    rng = np.random.default_rng(9)
    searcher = IvfSearcher(rng.standard_normal((400, 32)).astype(np.float32), nlist=8, nprobe=2)
    query = rng.standard_normal(32).astype(np.float32)
    many = searcher.search(query, 10)
    one = searcher.search(query, 10)
    positions = np.asarray([5, 399, 0, 5, *one.top.tolist()[:3], 123], dtype=np.int64)
    assert many.scores_of(positions) == [one.score(int(p)) for p in positions]


@pytest.mark.parametrize("need", [1, 3, 40])
def test_a_pull_bounded_by_compact_scores_orders_as_every_exact_cosine_would(monkeypatch, need):
    """On an approximate searcher a pull first keeps only what its int8 bounds say can still rank
    among the first `need` (at 1M units a class list holds 10–30k), and chooses the
    same units in the same order as scoring every one exactly, ties (duplicate vectors) included."""
    from selection.engine import retrieval
    from selection.engine.index.ivf import IvfSearcher
    from selection.engine.types import EngineConfig

    rng = np.random.default_rng(17)
    centres = rng.standard_normal((6, 48))
    vectors = centres[rng.integers(0, 6, 3000)] + 0.6 * rng.standard_normal((3000, 48))
    vectors[2000:2100] = vectors[1000:1100]  # exact ties: the order falls to BM25, then position
    words = "baseline retrieval budget scope store frame trace ledger pool rank".split()
    units = [
        Unit(id=f"u{i:05d}", project="p", evidence_class="note",
             text=" ".join(words[(i * 7 + j) % len(words)] for j in range(2 + i % 4)))
        for i in range(3000)
    ]
    index = CorpusIndex.build(units, vectors.astype(np.float32), dense_threshold=10)
    assert isinstance(index.dense, IvfSearcher)
    config = EngineConfig()
    query, objective = vectors[1050] + 0.1 * centres[0], vectors[7]

    def pool():
        return retrieval.Pool(
            query=retrieval.search(index, "budget scope", query, config),
            objective=retrieval.search(index, "trace ledger", objective, config),
        )

    positions = np.arange(3000, dtype=np.int64)
    kept = retrieval._bounded([pool().query, pool().objective], positions, need)
    assert kept.size < positions.size / 4  # the bound did the work
    bounded = retrieval.by_relevance(pool(), positions, need)
    monkeypatch.setattr(retrieval, "BOUNDED_FROM", 10**9)
    assert bounded == retrieval.by_relevance(pool(), positions, need)
    assert len(bounded) == need
