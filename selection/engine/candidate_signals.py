"""The ten signals of every candidate, computed before eligibility, so that a rejected unit's record
is as complete as an admitted one's."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import signals as sig
from .candidate_records import own_relevance
from .index import CorpusIndex
from .outputs import SIGNAL_NAMES
from .policy import Working, work_type_preferences
from .retrieval import Pool


def compute_signals(
    candidates: Sequence[Working],
    positions: np.ndarray,
    index: CorpusIndex,
    request,
    standpoint,
    scope,
    pool: Pool | None = None,
) -> np.ndarray:
    """All ten signals for every candidate, before eligibility; returns the Jaccard matrix.

    query_relevance and objective_relevance read each text's own fused list (1 - (rank - 1) / n;
    0 when absent), never the pool position that mixes the two."""
    frame, work = request.project_frame, request.work_frame
    # goal relevance always reads the work frame's own preference list, whatever the condition ranks
    # by, so the same unit's trace is comparable across conditions
    goal_prefs = work_type_preferences(frame, work.work_type)
    units = [c.unit for c in candidates]
    pos_list = [c.pos for c in candidates]
    overlap = sig.objective_overlap(index, positions, work.objective)
    class_term = sig.class_terms(goal_prefs)
    class_terms = np.asarray([class_term.get(u.evidence_class, 0.0) for u in units])
    goal = sig.goal_relevance(class_terms, overlap) if candidates else np.zeros(0)
    jaccard = sig.jaccard_matrix(index, positions)
    redundancy = sig.redundancy_before(jaccard)
    loop_weight = sig.open_loop_weight(frame, work.work_type)
    reference = standpoint or index.newest
    pool_ids = frozenset(u.id for u in units)
    own_query = own_relevance(pool.query if pool else None)
    own_objective = own_relevance(pool.objective if pool else None)
    # one column per signal over the whole pool, in SIGNAL_NAMES order; rounded as Python rounds
    columns = (
        [own_query.get(p, 0.0) for p in pos_list],
        [own_objective.get(p, 0.0) for p in pos_list],
        [round(v, 6) for v in goal.tolist()],
        [1.0 if u.project in scope else 0.0 for u in units],
        [sig.temporal_validity(u, standpoint, index) for u in units],
        [sig.evidence_strength(u) for u in units],
        [loop_weight if u.is_open_loop else 0.0 for u in units],
        [round(v, 6) for v in sig.adjacencies(index, units, pool_ids)],
        [round(v, 6) for v in sig.recencies(units, reference)],
        [round(v, 6) for v in redundancy.tolist()],
    )
    for c, values in zip(candidates, zip(*columns, strict=True), strict=True):
        c.signals = dict(zip(SIGNAL_NAMES, values, strict=True))
    return jaccard
