"""Query vectors: each query or objective embedded alone, once per process (an LRU cache), by the
query encoder (selection.memory.query_encoder: the model's saved graph, without the full loader's
imports; the same bits as the full loader's vector of the text alone)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from selection.memory import query_encoder

_QUERY_VECTORS: OrderedDict[str, tuple[float, ...]] = OrderedDict()
_QUERY_CACHE_SIZE = 4096
_query_lock = threading.Lock()


def embed_queries(texts: list[str]) -> list[tuple[float, ...]]:
    """Dense vectors of queries and objectives, each text in a forward pass of its own; repeated
    texts (replays, evaluations) are embedded once per process.

    Not one batch: padded to a longer text of its batch, a query came out different in the last
    bits (up to 2e-7 a component), so its vector, and at a near tie its selection, depended on the
    objective it happened to be embedded with; and the padded pair cost more than two passes
    (docs/performance.md, "Replays and the end-to-end path")."""
    with _query_lock:
        missing = [t for t in dict.fromkeys(texts) if t not in _QUERY_VECTORS]
    if missing:
        vectors = [query_encoder.encode_query(text) for text in missing]
        with _query_lock:
            for text, vector in zip(missing, vectors, strict=True):
                _QUERY_VECTORS[text] = tuple(float(x) for x in vector)
            while len(_QUERY_VECTORS) > _QUERY_CACHE_SIZE:
                _QUERY_VECTORS.popitem(last=False)
    with _query_lock:
        found = [_QUERY_VECTORS.get(t) for t in texts]
    # a text evicted between the two locks (a very busy cache) is embedded again, alone
    return [v if v is not None else embed_queries([t])[0] for t, v in zip(texts, found, strict=True)]


def embed_query(text: str) -> tuple[float, ...]:
    return embed_queries([text])[0]


def embed_cache_clear() -> None:
    with _query_lock:
        _QUERY_VECTORS.clear()
