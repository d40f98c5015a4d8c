"""The ONNX Runtime embedder gives the torch model's vectors; batching by length keeps order."""

from __future__ import annotations

import numpy as np
import pytest

from bench.generator import generate
from selection.memory import embeddings
from selection.memory.embeddings import Embedder, EmbeddingConfigError, default_model_dir


def varied_texts() -> list[str]:
    """A few hundred texts of every kind an import meets: the bench generator's units (median
    about 360 characters), empty-ish ones, ones past the model's 512 tokens (truncated), unicode."""
    generated = [unit.text for unit in generate(240, seed=11, tasks=1).units]
    odd = [
        "", " ", "a", ".", "\n\t", "??", "x" * 3, "0", "—",
        "Ünïcödé àccents: café, naïve, Zürich, Øresund, Łódź",
        "日本語のテキストも埋め込める。検索の質を確かめる。",
        "中文文本：选择上下文的框架治理。",
        "Русский текст о памяти агента и выборе контекста.",
        "نص عربي من اليمين إلى اليسار",
        "emoji 🚀🔥 with skin tones 👍🏽 and flags 🇫🇷 and ZWJ 👩‍💻",
        "def f(x):\n    return {'a': [1, 2, 3]}  # code\n",
        "SELECT * FROM units WHERE id = 'u-1'; -- sql",
        "a\u0000b control \u0007 characters \u200b zero width",
    ]
    long = [
        " ".join(["the frame decides which memory the model may see"] * 80),  # ~720 tokens
        "word " * 300,  # ~300 tokens: past 256, inside 512
        "supercalifragilistic" * 200,  # one long unknown word, many word pieces
        "日本語" * 700,
    ]
    return generated + odd + long


@pytest.fixture(scope="module")
def both_runtimes(tmp_path_factory):
    from django.conf import settings

    before = getattr(settings, "FG_EMBEDDING_CACHE_DIR", "")
    settings.FG_EMBEDDING_CACHE_DIR = str(tmp_path_factory.mktemp("embedding-cache"))
    try:
        yield Embedder(default_model_dir(), runtime="torch"), Embedder(
            default_model_dir(), runtime="onnx"
        )
    finally:
        settings.FG_EMBEDDING_CACHE_DIR = before


def test_onnx_vectors_match_torch_vectors(both_runtimes):
    torch_embedder, onnx_embedder = both_runtimes
    texts = varied_texts()
    assert len(texts) > 250
    for rows in embeddings.length_batches(texts, 64):
        batch = [texts[i] for i in rows]
        a, b = torch_embedder.encode(batch), onnx_embedder.encode(batch)
        assert a.shape == b.shape == (len(batch), 384)
        cosines = np.sum(a * b, axis=1)
        worst = int(np.argmin(cosines))
        assert cosines[worst] >= 0.999, f"cosine {cosines[worst]:.6f} for {batch[worst][:60]!r}"
        np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    # a query alone (one text, one thread) too
    query = "which rule governs retention of erased units?"
    assert float(torch_embedder.encode([query])[0] @ onnx_embedder.encode([query])[0]) >= 0.999


def test_the_export_is_made_once_and_named_by_the_model_fingerprint(both_runtimes):
    _, onnx_embedder = both_runtimes
    path = onnx_embedder.onnx_path
    assert path is not None and path.exists()
    fingerprint = embeddings.model_fingerprint(default_model_dir())
    assert fingerprint[:24] in path.name
    made = path.stat().st_mtime_ns
    again = Embedder(default_model_dir(), runtime="onnx")
    assert again.onnx_path == path and path.stat().st_mtime_ns == made
    assert [p.name for p in path.parent.iterdir()] == [path.name], "no scratch file is left"


def test_an_unknown_runtime_is_refused_naming_the_setting(monkeypatch):
    monkeypatch.setenv("FG_EMBEDDING_RUNTIME", "tensorflow")
    with pytest.raises(EmbeddingConfigError, match="FG_EMBEDDING_RUNTIME='tensorflow'"):
        embeddings.configured_runtime()
    monkeypatch.setenv("FG_EMBEDDING_RUNTIME", " ONNX ")
    assert embeddings.configured_runtime() == "onnx"
    monkeypatch.delenv("FG_EMBEDDING_RUNTIME")
    assert embeddings.configured_runtime() == embeddings.DEFAULT_RUNTIME


def test_length_batches_cover_every_text_once_shortest_first():
    texts = varied_texts()
    batches = embeddings.length_batches(texts, 64)
    flat = [i for rows in batches for i in rows]
    assert sorted(flat) == list(range(len(texts)))
    lengths = [len(texts[i]) for i in flat]
    assert lengths == sorted(lengths)
    for rows in batches:
        longest = min(max(len(texts[i]) for i in rows), embeddings.MAX_CHARS)
        assert len(rows) <= 64
        assert len(rows) == 1 or len(rows) * longest <= embeddings.BATCH_CHAR_BUDGET
    # a handful of short texts (queries) stays one batch
    assert embeddings.length_batches(["a", "bb", "c"], 64) == [[0, 2, 1]]
