"""Retrieval indexes, one concern a module; imports run one way, no cycle:

tokens, topk  <-  bm25, dense  <-  ivf  <-  corpus (CorpusIndex, which picks the dense searcher);
bm25, tokens  <-  scoped (BM25 over a scope with the scope's own statistics).
"""

from .bm25 import FULL_ROW_MAX_TERMS, FULL_ROW_MIN_UNITS, PRUNE_MIN_UNITS, BM25Hits, BM25Index
from .corpus import IVF_THRESHOLD, CorpusIndex, dense_searcher
from .dense import DenseHits, DenseSearcher, NumpyExactSearcher, normalise_rows, normalise_vector
from .ivf import IvfSearcher
from .scoped import (
    SCOPE_ROWS_MAX,
    SCOPE_ROWS_SHARE,
    ScopeBM25,
    ScopedScores,
    scope_bm25,
    searched_by_rows,
)
from .tokens import TOKENISER, tokenise
from .topk import TOP_K_BLOCKED, top_k

__all__ = [
    "BM25Hits",
    "BM25Index",
    "CorpusIndex",
    "DenseHits",
    "DenseSearcher",
    "FULL_ROW_MAX_TERMS",
    "FULL_ROW_MIN_UNITS",
    "IVF_THRESHOLD",
    "IvfSearcher",
    "NumpyExactSearcher",
    "PRUNE_MIN_UNITS",
    "SCOPE_ROWS_MAX",
    "SCOPE_ROWS_SHARE",
    "ScopeBM25",
    "ScopedScores",
    "TOKENISER",
    "TOP_K_BLOCKED",
    "dense_searcher",
    "normalise_rows",
    "normalise_vector",
    "scope_bm25",
    "searched_by_rows",
    "tokenise",
    "top_k",
]
