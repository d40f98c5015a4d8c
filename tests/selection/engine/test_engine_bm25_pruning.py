"""BM25 search with MaxScore pruning: the same top k as scoring every unit, ties at the cut included,
and bit-identical scores for whatever a caller asks about, while common terms stop touching most
units."""

import json

import numpy as np
import pytest
from engine_testkit import BOOK
from rank_bm25 import BM25Okapi

from bench.generator import generate
from selection.engine.index import BM25Index, CorpusIndex, tokenise, top_k
from selection.engine.index import bm25 as bm25_module

K = 60


def exhaustive(index: BM25Index, tokens, k, allowed=None):
    full = index.scores(tokens)
    ranked = full if allowed is None else np.where(allowed, full, 0.0)
    return top_k(ranked, k, positive_only=True), full


def assert_same_search(index: BM25Index, tokens, k=K, allowed=None):
    hits = index.search(tokens, k, allowed=allowed, prune=True)
    expected, full = exhaustive(index, tokens, k, allowed)
    assert hits.top.tolist() == expected.tolist(), tokens
    # the scores a trace records, for the hits and for units the search never scored
    probe = np.concatenate([expected, np.arange(0, index.size, max(index.size // 97, 1))])
    assert np.array_equal(hits.scores(probe), full[probe]), tokens
    return hits


@pytest.fixture(scope="module")
def generated():
    """A generated corpus whose common words get full-length rows, as from 20,000 units."""
    bench = generate(4000, tasks=32)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bm25_module, "FULL_ROW_MIN_UNITS", 0)
        index = CorpusIndex.build(bench.units)
    assert index.bm25.full_rows  # the gathers read full rows as well as postings
    return bench, index


def test_pruned_top_k_equals_scoring_every_unit_on_a_generated_corpus(generated):
    bench, index = generated
    rng = np.random.default_rng(5)
    queries = [t.query for t in bench.tasks] + [t.objective for t in bench.tasks]
    for _ in range(40):  # random words of random units, repeats and function words included
        words = tokenise(bench.units[int(rng.integers(len(bench.units)))].text)
        picked = rng.choice(len(words), size=min(len(words), int(rng.integers(1, 14))))
        queries.append(" ".join(words[int(i)] for i in picked))
    scored = []
    for q in queries:
        for k in (1, 10, K):
            hits = assert_same_search(index.bm25, tokenise(q), k)
            scored.append(hits.scored)
    # the task queries mix function words (in most units) with topic words: pruning scores a
    # small share of the corpus for most of them
    task_scored = scored[: 3 * 2 * len(bench.tasks) : 3]
    assert np.median(task_scored) < index.bm25.size / 4


def test_pruned_search_with_an_allowed_mask_equals_the_masked_exhaustive_one(generated):
    bench, index = generated
    projects = sorted({u.project for u in bench.units})
    for scope in ([projects[0]], projects[:3]):
        allowed = index.scope_mask(frozenset(scope))
        for task in bench.tasks[:16]:
            assert_same_search(index.bm25, tokenise(task.query), K, allowed)


def test_ties_at_the_cut_are_broken_by_position_as_when_every_unit_is_scored():
    rng = np.random.default_rng(11)
    filler = [f"w{i}" for i in range(300)]
    docs = []
    for i in range(3000):
        if i % 9 == 0:  # 334 identical units: far more ties than k at the top score
            docs.append("alpha beta gamma the of".split())
        elif i % 13 == 0:
            docs.append("alpha the of and".split())
        else:
            docs.append(["the", "of"] + [filler[int(j)] for j in rng.integers(0, 300, 12)])
    index = BM25Index(docs)
    pruned = 0
    for q in ("alpha beta gamma", "alpha", "the alpha of", "gamma gamma the", "w7 alpha w9"):
        for k in (1, K, 400):
            pruned += assert_same_search(index, tokenise(q), k).full is None
    assert pruned >= 10


def test_search_scores_match_rank_bm25_bit_for_bit():
    lines = (BOOK / "units.jsonl").read_text().splitlines() if BOOK.exists() else []
    texts = [json.loads(line)["text"] for line in lines if line.strip()]
    docs = [tokenise(t) for t in texts] or [tokenise("the baseline dog"), tokenise("the")]
    reference = BM25Okapi(docs)
    ours = BM25Index(docs)
    for q in ("baseline store postgres sqlite", "What is left to do?", "the the review"):
        tokens = tokenise(q)
        hits = ours.search(tokens, 10, prune=True)
        positions = np.arange(len(docs))
        assert np.array_equal(hits.scores(positions), reference.get_scores(tokens))
        assert hits[int(positions[-1])] == reference.get_scores(tokens)[-1]


def test_unknown_or_empty_queries_find_nothing():
    index = BM25Index([tokenise("a b c"), tokenise("c d")])
    assert index.search(tokenise("zzz"), 5).top.tolist() == []
    assert index.search([], 5).top.tolist() == []
    assert index.search(tokenise("c"), 0).top.tolist() == []

