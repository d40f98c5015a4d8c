"""A query's vector from the least that encoding one text needs: the model's own tokenizer file read
by `tokenizers`, and a graph of the model (TorchScript for the torch runtime, the ONNX export for
onnx) saved once by the full loader (FlagEmbedding). A fresh process pays neither FlagEmbedding's
nor transformers' import; a process that has the full loader built already uses the same graph.

A vector comes out with the same bits as the full loader's `Embedder.encode([text])` (one text, no
padding, one thread: tests/selection/test_embedding_fast_path.py compares them byte for byte), so
a selection's digest does not depend on which path embedded its query.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from selection.memory import embeddings

# bumped when the saved query graph changes, so that a saved graph of an older shape is not used
QUERY_GRAPH_VERSION = 1
_encode_lock = threading.Lock()
_build_lock = threading.Lock()


def model_fingerprint(model_dir: Path) -> str:
    """embeddings.model_fingerprint, remembered beside the cache by each file's size and mtime: a
    fresh process hashes the ~90 MB of weights once per change of the files, not once per call."""
    model_dir = Path(model_dir)
    files = sorted(p for p in model_dir.rglob("*") if p.is_file())
    stamp = hashlib.sha256(
        "\0".join(f"{p.relative_to(model_dir)}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files).encode()
        + f"\0{importlib.metadata.version('torch')}\0{embeddings.ONNX_EXPORT_VERSION}".encode()
    ).hexdigest()
    memo = embeddings.onnx_cache_dir() / "fingerprints" / f"{stamp[:32]}.txt"
    try:
        return memo.read_text().strip()
    except OSError:
        pass
    fingerprint = embeddings.model_fingerprint(model_dir)
    _write_atomically(memo, fingerprint.encode())
    return fingerprint


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=".part-", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(scratch, target)
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)


def torch_graph_path(model_dir: Path) -> Path:
    name = f"{Path(model_dir).name}-{model_fingerprint(model_dir)[:24]}-query-v{QUERY_GRAPH_VERSION}.pt"
    return embeddings.onnx_cache_dir() / name


def onnx_graph_path(model_dir: Path) -> Path:
    """Where embeddings.onnx_export puts the model's ONNX export (the same name)."""
    return embeddings.onnx_cache_dir() / f"{Path(model_dir).name}-{model_fingerprint(model_dir)[:24]}.onnx"


def torch_graph_save(embedder: embeddings.Embedder) -> Path:
    """The full loader's model, mean pooling and normalisation traced on one unpadded text (the
    shape every query has) and saved as TorchScript; written to a temporary file and renamed."""
    import torch

    target = torch_graph_path(embedder.model_dir)
    if target.exists():
        return target
    flag = embedder._model
    sample = flag.tokenizer(
        ["a probe of one text"], truncation=True, max_length=embeddings.MAX_TOKENS, return_tensors="pt"
    )
    names = ("input_ids", "attention_mask", "token_type_ids")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=".trace-", suffix=".pt", dir=target.parent)
    os.close(handle)
    try:
        import warnings

        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's notes on the model's Python branches
            traced = torch.jit.trace(
                embeddings._Pooled.module(flag.model),
                tuple(sample[name] for name in names),
                check_trace=False,
            )
        traced.save(scratch)
        os.replace(scratch, target)
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)
    return target


class QueryEncoder:
    """One text at a time through a saved graph; `how` says which graph, for --explain and logs."""

    def __init__(self, model_dir: Path, runtime: str, graph: Path):
        from tokenizers import Tokenizer

        self.model_dir = Path(model_dir)
        self.runtime = runtime
        self.graph = graph
        self.name = (
            embeddings.DEFAULT_MODEL_NAME if self.model_dir == embeddings.default_model_dir() else self.model_dir.name
        )
        tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        # what FlagModel's tokenizer call does: truncate to MAX_TOKENS, pad nothing (one text)
        tokenizer.enable_truncation(max_length=embeddings.MAX_TOKENS)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._types = _has_token_types(self.model_dir)
        if runtime == "onnx":
            self._run = self._onnx_runner()
        else:
            self._run = self._torch_runner()
        self.how = f"{runtime} graph {graph.name}"

    def tokens(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        encoding = self._tokenizer.encode(text)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        mask = np.asarray([encoding.attention_mask], dtype=np.int64)
        types = np.asarray([encoding.type_ids], dtype=np.int64) if self._types else np.zeros_like(ids)
        return ids, mask, types

    def encode(self, text: str) -> np.ndarray:
        vector = self._run(*self.tokens(text))
        vector = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        norms = np.linalg.norm(vector, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (vector / norms)[0]

    def _torch_runner(self):
        import warnings

        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.load's note on torch.export
            module = torch.jit.load(str(self.graph), map_location="cpu").eval()

        def run(ids, mask, types):
            # the full loader's lock: torch's thread count is process-wide, and a batch the full
            # loader encodes meanwhile must keep its own
            with embeddings._lock, torch.inference_mode(), torch.jit.optimized_execution(False):
                threads = torch.get_num_threads()
                torch.set_num_threads(1)  # as the full loader encodes one text
                try:
                    out = module(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types))
                finally:
                    torch.set_num_threads(threads)
                return out.float().numpy()

        return run

    def _onnx_runner(self):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # the full loader's session options (embeddings.Embedder._onnx_session), so the same bits
        options.intra_op_num_threads = embeddings.onnx_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = onnxruntime.InferenceSession(str(self.graph), options, providers=["CPUExecutionProvider"])

        def run(ids, mask, types):
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            with _encode_lock:
                (vectors,) = session.run(["embedding"], feed)
            return vectors

        return run


def _has_token_types(model_dir: Path) -> bool:
    """BERT-like models take token types; the tokenizer config says when a model does not."""
    try:
        config = json.loads((Path(model_dir) / "tokenizer_config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return True
    names = config.get("model_input_names")
    return names is None or "token_type_ids" in names


def fast_encoder_possible(model_dir: Path) -> bool:
    """A mean-pooled model with a tokenizer.json; bge-m3 (its own pooling) uses the full loader."""
    model_dir = Path(model_dir)
    return "bge-m3" not in model_dir.name.lower() and (model_dir / "tokenizer.json").exists()


@lru_cache(maxsize=1)
def get_query_encoder():
    """The process's query encoder: the saved graph when there is one; else the full loader is
    built once, saves the graph, and the graph serves from then on (the next process starts fast).
    A model the fast path cannot run is served by the full loader itself."""
    model_dir = embeddings.configured_model_dir()
    runtime = embeddings.configured_runtime()
    if not fast_encoder_possible(model_dir):
        return FullLoaderQueries(embeddings.get_embedder())
    with _build_lock:
        graph = torch_graph_path(model_dir) if runtime == "torch" else onnx_graph_path(model_dir)
        if not graph.exists():
            full = embeddings.get_embedder()  # the onnx runtime's full loader exports it here
            if runtime == "torch":
                graph = torch_graph_save(full)
            else:
                graph = full.onnx_path
        return QueryEncoder(model_dir, runtime, graph)


class FullLoaderQueries:
    """The full loader as a query encoder (bge-m3, whose pooling is FlagEmbedding's own)."""

    def __init__(self, embedder: embeddings.Embedder):
        self.embedder = embedder
        self.name = embedder.name
        self.how = f"{embedder.runtime} full loader"

    def encode(self, text: str) -> np.ndarray:
        return self.embedder.encode([text])[0]


def encode_query(text: str) -> np.ndarray:
    return get_query_encoder().encode(text)
