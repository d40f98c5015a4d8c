"""The query encoder (tokenizers and the model's saved graph) gives the full loader's vectors, byte
for byte, for every kind of text, in both runtimes; and a fresh process encodes a query without
importing FlagEmbedding or transformers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from selection.memory import embeddings, query_encoder
from selection.memory.embeddings import Embedder, default_model_dir
from tests.selection.test_embedding_runtimes import varied_texts


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    from django.conf import settings

    before = getattr(settings, "FG_EMBEDDING_CACHE_DIR", "")
    settings.FG_EMBEDDING_CACHE_DIR = str(tmp_path_factory.mktemp("embedding-cache"))
    try:
        yield settings.FG_EMBEDDING_CACHE_DIR
    finally:
        settings.FG_EMBEDDING_CACHE_DIR = before


@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_the_fast_path_gives_the_full_loaders_bytes(cache_dir, runtime):
    full = Embedder(default_model_dir(), runtime=runtime)
    if runtime == "torch":
        graph = query_encoder.torch_graph_save(full)
    else:
        graph = full.onnx_path
    fast = query_encoder.QueryEncoder(default_model_dir(), runtime, graph)
    texts = varied_texts() + ["which rule governs retention of erased units?", "retry policy"]
    assert len(texts) > 250
    for text in texts:
        ids, mask, types = fast.tokens(text)
        flag = full._model.tokenizer([text], truncation=True, max_length=embeddings.MAX_TOKENS, return_tensors="np")
        assert ids.tolist() == flag["input_ids"].tolist(), text[:60]
        assert types.tolist() == flag["token_type_ids"].tolist(), text[:60]
        expected = full.encode([text])[0]
        got = fast.encode(text)
        assert got.dtype == expected.dtype and got.shape == expected.shape == (384,)
        assert got.tobytes() == expected.tobytes(), f"{runtime}: {text[:60]!r}"
    # the same text twice: the same bytes (no state carried between calls)
    assert fast.encode(texts[0]).tobytes() == fast.encode(texts[0]).tobytes()


def test_a_fresh_process_encodes_a_query_without_the_full_loader(cache_dir):
    """With the graph saved, a new process imports neither FlagEmbedding nor transformers."""
    query_encoder.torch_graph_save(Embedder(default_model_dir(), runtime="torch"))
    probe = (
        "import os, sys, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings');"
        "django.setup(); from django.conf import settings;"
        f"settings.FG_EMBEDDING_CACHE_DIR = {cache_dir!r};"
        "from selection.serving.query_vectors import embed_query;"
        "v = embed_query('how are retries handled');"
        "print(len(v), 'FlagEmbedding' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, "FG_EMBEDDING_RUNTIME": "torch"},
    )
    assert out.stdout.split()[-3:] == ["384", "False", "False"], out.stderr[-2000:]
