"""top_k: the k best positions of a score array, ties broken by position, never by partition luck."""

from __future__ import annotations

import numpy as np

TOP_K_BLOCKED = 65_536  # from this length top_k narrows the field with block maxima first


def top_k(scores: np.ndarray, k: int, *, positive_only: bool = False) -> np.ndarray:
    """Positions of the k best scores, ordered by (score desc, position asc).

    Positions follow unit id order, so ties break by unit id. Ties at the cut are resolved the same
    way, so the answer never depends on argpartition's internal order.
    """
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.empty(0, dtype=np.int64)
    if n >= TOP_K_BLOCKED and k * 64 <= n:
        # k blocks each hold a maximum >= the smallest of them, so at least k scores reach it and
        # the k-th best is >= it: everything below can be dropped before the exact selection
        width = n // k
        floor = scores[: width * k].reshape(k, width).max(axis=1).min()
        if positive_only:
            floor = max(floor, np.nextafter(0, 1, dtype=scores.dtype))
        field = np.flatnonzero(scores >= floor)
        if field.size < n // 2:
            return field[top_k(scores[field], k)]
    if positive_only:
        eligible = np.flatnonzero(scores > 0)
        if eligible.size == 0:
            return eligible
        sub = scores[eligible]
    else:
        eligible = None
        sub = scores
    m = sub.shape[0]
    if m > k:
        part = np.argpartition(-sub, k - 1)[:k]
        cut = sub[part].min()
        # every position tied with the cut competes on position, not on partition luck
        chosen = np.flatnonzero(sub >= cut)
    else:
        chosen = np.arange(m)
    order = np.lexsort((chosen, -sub[chosen]))[:k]
    chosen = chosen[order]
    return chosen if eligible is None else eligible[chosen]
