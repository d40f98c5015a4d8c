"""assemble: the index of a changed unit set, made from an index of the old one.

A live corpus changes a unit at a time (a write, a supersession, an erasure, an admission), and
every score an index gives depends on the whole unit set: BM25's idf, average length and
epsilon floor, the vocabulary's numbering (first occurrence over the units in id order), the
positions (id order, which break every tie), the per-(project, class) lists, the link maps, the
recency order and the digest. So an index of the set at sequence N must be the one
`CorpusIndex.build` makes from that set, whatever index it starts from.

`assemble(base, drop=..., add=...)` makes exactly that index (the same object, field for field:
tests/selection/test_live_index.py compares bundle and trace digests against a rebuild) while
skipping what a rebuild spends its time on:

- the kept units are not tokenised again: their tokens are read from the base's `token_stream`
  (term ids of the base's vocabulary), the added units' tokens are numbered after them, and the
  vocabulary is renumbered in first-occurrence order over the merged stream in one vectorised pass
  (encoded_from_stream), so postings, weights and idf are computed by the very code a rebuild
  runs, in the same order;
- the kept units' vectors are the base searcher's normalised rows (a row's normalisation depends
  on that row alone), the added ones are normalised as a rebuild normalises them;
- nothing is read from the database.

Everything else (the BM25 weights, the derived maps) is recomputed vectorised or in one pass, as a
rebuild computes it: that is what keeps it bit-identical.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import numpy as np

from ..types import Unit
from .bm25 import EncodedDocs
from .corpus import IVF_THRESHOLD, CorpusIndex, dense_searcher
from .dense import normalise_rows
from .tokens import tokenise
from .units import UnitTable


def _ids(index: CorpusIndex) -> list[str]:
    units = index.units
    return units.ids if isinstance(units, UnitTable) else [u.id for u in units]


def encoded_from_stream(stream: np.ndarray, lengths: np.ndarray, words: Sequence[str]) -> EncodedDocs:
    """The EncodedDocs of documents already tokenised: `stream` holds every document's tokens end
    to end as indices into `words` (any numbering), `lengths` each document's token count. The
    vocabulary is renumbered in first-occurrence order over the stream, so the result equals
    EncodedDocs over the same token lists (vocab, lengths, tokens, pairs)."""
    docs = EncodedDocs(())
    stream = np.asarray(stream, dtype=np.int64)
    found, first = np.unique(stream, return_index=True)
    order = found[np.argsort(first, kind="stable")]  # word indices in first-occurrence order
    renumber = np.zeros(len(words), dtype=np.int32)
    renumber[order] = np.arange(order.size, dtype=np.int32)
    docs.vocab = {words[i]: n for n, i in enumerate(order.tolist())}
    docs.lengths = np.asarray(lengths, dtype=np.int64)
    docs.size = int(docs.lengths.size)
    docs.tokens = renumber[stream] if stream.size else np.zeros(0, dtype=np.int32)
    return docs


def _gather(pool: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """pool[starts[0]:starts[0]+lengths[0]], pool[starts[1]:...], ... end to end, vectorised."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=pool.dtype)
    ends = np.cumsum(lengths)
    shift = np.repeat(starts - (ends - lengths), lengths)
    return pool[shift + np.arange(total)]


def assemble(
    base: CorpusIndex,
    *,
    drop: Collection[str] = (),
    add: Sequence[Unit] = (),
    vectors: np.ndarray | None = None,
    dense: bool = True,
    dense_threshold: int | None = IVF_THRESHOLD,
    centroids: np.ndarray | Callable[[list[Unit], np.ndarray], np.ndarray | None] | None = None,
) -> CorpusIndex:
    """CorpusIndex.build(units, vectors) of the base's units less `drop` and less every id of
    `add`, plus `add` (each with its row of `vectors`), without tokenising a kept unit.

    `dense`: give the index a dense searcher (the base must have one that holds its rows, and
    `vectors` must cover `add`); False builds none (PostgreSQL answers dense search, or some unit
    has no vector). `centroids`: the IVF's lists where the set reaches `dense_threshold` (or a
    function of the units in id order and their normalised rows that gives them).
    """
    added = sorted(add, key=lambda u: u.id)
    added_ids = [u.id for u in added]
    if len(set(added_ids)) != len(added_ids):
        raise ValueError("duplicate unit ids among the added units")
    base_ids = _ids(base)
    keep = np.ones(len(base_ids), dtype=bool)
    for uid in set(drop) | set(added_ids):
        pos = base.position.get(uid)
        if pos is not None:
            keep[pos] = False
    kept = np.flatnonzero(keep)
    combined = [base_ids[p] for p in kept.tolist()] + added_ids
    # two sorted runs: the sort merges them
    order = np.asarray(sorted(range(len(combined)), key=combined.__getitem__), dtype=np.int64)
    n_kept = kept.size
    units = [base.units[int(kept[i])] if i < n_kept else added[i - n_kept] for i in order.tolist()]

    # tokens: the base's stream for kept units, the added units' tokens numbered after the base's
    # vocabulary (new words appended), gathered in the merged order
    vocab = base.bm25.vocab
    words = list(vocab)
    more: dict[str, int] = {}
    added_streams = []
    for unit in added:
        ids = []
        for word in tokenise(unit.text):
            at = vocab.get(word)
            if at is None:
                at = more.get(word)
                if at is None:
                    at = more[word] = len(words)
                    words.append(word)
            ids.append(at)
        added_streams.append(np.asarray(ids, dtype=np.int64))
    base_lengths = np.asarray(base.bm25.doc_len, dtype=np.int64)
    base_starts = np.zeros(base_lengths.size, dtype=np.int64)
    if base_lengths.size:
        base_starts[1:] = np.cumsum(base_lengths)[:-1]
    added_lengths = np.asarray([s.size for s in added_streams], dtype=np.int64)
    added_starts = int(base_lengths.sum()) + np.concatenate(([0], np.cumsum(added_lengths)[:-1])).astype(np.int64)
    pool = np.concatenate([np.asarray(base.token_stream, dtype=np.int64), *added_streams])
    starts = np.concatenate([base_starts[kept], added_starts[: len(added)]])[order]
    lengths = np.concatenate([base_lengths[kept], added_lengths])[order]
    encoded = encoded_from_stream(_gather(pool, starts, lengths), lengths, words)

    searcher = None
    if dense and units:  # no unit, no vector: a build from no rows has no dense searcher either
        if base.dense is None or not hasattr(base.dense, "rows"):
            raise ValueError("the base index holds no vectors to assemble a dense searcher from")
        dimension = base.dense.dimension
        fresh = np.zeros((0, dimension), dtype=np.float32)
        if added:
            if vectors is None or np.asarray(vectors).shape != (len(added_ids), dimension):
                raise ValueError(f"vectors must be ({len(added_ids)}, {dimension}) for the added units")
            by_id = {u.id: i for i, u in enumerate(add)}
            fresh = normalise_rows(np.asarray(vectors)[[by_id[uid] for uid in added_ids]])
        rows = np.concatenate([base.dense.rows(kept), fresh])[order]
        if callable(centroids):
            big = dense_threshold is not None and rows.shape[0] >= dense_threshold
            centroids = centroids(units, rows) if big else None
        searcher = dense_searcher(rows, threshold=dense_threshold, centroids=centroids, normalised=True)
    bm25 = base.bm25
    return CorpusIndex(units, dense=searcher, k1=bm25.k1, b=bm25.b, epsilon=bm25.epsilon, encoded=encoded)
