"""BM25Index: inverted-index BM25 whose scores are bit-identical to rank_bm25.BM25Okapi's."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

FULL_ROW_MIN_UNITS = 20_000  # below this a scatter is as cheap as a full-length add
FULL_ROW_MAX_TERMS = 32  # full-length rows kept for at most this many of the commonest terms


class BM25Index:
    """Inverted-index BM25 with rank_bm25.BM25Okapi's exact arithmetic (same float64 operations,
    same
    order), so scores are bit-identical while a query only touches its terms' postings."""

    def __init__(
        self, docs: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.size = len(docs)
        vocab: dict[str, int] = {}
        df: list[int] = []
        post_docs: list[list[int]] = []
        post_tf: list[list[int]] = []
        lengths = np.empty(self.size, dtype=np.int64)
        for pos, doc in enumerate(docs):
            lengths[pos] = len(doc)
            counts: dict[str, int] = {}
            for word in doc:
                counts[word] = counts.get(word, 0) + 1
            for word, tf in counts.items():  # first-occurrence order, as rank_bm25 builds `nd`
                tid = vocab.get(word)
                if tid is None:
                    tid = vocab[word] = len(df)
                    df.append(0)
                    post_docs.append([])
                    post_tf.append([])
                df[tid] += 1
                post_docs[tid].append(pos)
                post_tf[tid].append(tf)
        self.vocab = vocab
        self.doc_len = lengths
        self.avgdl = (int(lengths.sum()) / self.size) if self.size else 0.0
        self.postings = [np.asarray(d, dtype=np.int64) for d in post_docs]
        self.tfs = [np.asarray(t, dtype=np.int32) for t in post_tf]  # half int64's memory
        # idf exactly as BM25Okapi._calc_idf: summed in first-appearance order, negatives floored at
        # eps
        idf = [0.0] * len(df)
        idf_sum = 0.0
        negative: list[int] = []
        for tid, freq in enumerate(df):
            value = math.log(self.size - freq + 0.5) - math.log(freq + 0.5)
            idf[tid] = value
            idf_sum += value
            if value < 0:
                negative.append(tid)
        self.average_idf = idf_sum / len(idf) if idf else 0.0
        eps = epsilon * self.average_idf
        for tid in negative:
            idf[tid] = eps
        self.idf = idf
        if self.size:
            # the length-normalisation term, computed over the whole array exactly as rank_bm25 does
            self.norm = k1 * (1 - b + b * lengths / self.avgdl)
        else:
            self.norm = np.zeros(0)
        # each posting's contribution, precomputed with the very expression scores() used to
        # evaluate per query (same float64 operations, so the same bits); a query then only adds
        k1p1 = k1 + 1
        self.weights = [
            (idf[tid] or 0) * (tf * k1p1 / (tf + self.norm[docs]))
            for tid, (docs, tf) in enumerate(zip(self.postings, self.tfs, strict=True))
        ]
        # terms in more than half the units also keep a full-length row: adding it whole is a
        # contiguous pass instead of a scatter, and adding 0.0 where the term is absent changes no
        # score (x + 0.0 == x)
        self.full_rows: dict[int, np.ndarray] = {}
        if self.size >= FULL_ROW_MIN_UNITS:
            common = sorted(
                (tid for tid, freq in enumerate(df) if freq * 2 > self.size),
                key=lambda tid: (-df[tid], tid),
            )[:FULL_ROW_MAX_TERMS]
            for tid in common:
                row = np.zeros(self.size)
                row[self.postings[tid]] = self.weights[tid]
                self.full_rows[tid] = row

    def describe(self) -> str:
        return f"bm25okapi(k1={self.k1},b={self.b},epsilon={self.epsilon})"

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """BM25Okapi.get_scores(tokens): repeated query tokens count again, unknown ones add
        nothing.
        """
        score = np.zeros(self.size)
        for word in tokens:
            tid = self.vocab.get(word)
            if tid is None:
                continue
            row = self.full_rows.get(tid)
            if row is not None:
                score += row
            else:
                score[self.postings[tid]] += self.weights[tid]
        return score
