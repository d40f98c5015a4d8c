"""The nine separated signals, computed for every candidate before anything is rejected."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from .index import CorpusIndex, tokenise
from .types import ProjectFrame, Unit

SUPERSEDED_VALIDITY = 0.25
ECHO_STRENGTH = 0.35
REFUTING_STRENGTH = 0.9
OBJECTIVE_TERM_MIN_LEN = 3  # objective words shorter than this carry no goal information


def _start(unit: Unit) -> datetime | None:
    return unit.valid_from or unit.created_at


def in_effect(unit: Unit, standpoint: datetime | None) -> bool:
    """Started as of the standpoint (a unit with no date, or no standpoint, counts as started)."""
    start = _start(unit)
    return standpoint is None or start is None or start <= standpoint


def superseded_as_of(unit: Unit, standpoint: datetime | None, index: CorpusIndex) -> bool:
    """Its validity ended by the standpoint, or a successor in the corpus is in effect by then."""
    if unit.valid_to is not None and (standpoint is None or unit.valid_to <= standpoint):
        return True
    for successor_id in index.successors(unit.id):
        successor = index.unit(successor_id)
        if successor is not None and in_effect(successor, standpoint):
            return True
    return False


def temporal_validity(unit: Unit, standpoint: datetime | None, index: CorpusIndex) -> float:
    """1.0 when current as of the standpoint; 0.25 when superseded or not yet in effect."""
    if superseded_as_of(unit, standpoint, index) or not in_effect(unit, standpoint):
        return SUPERSEDED_VALIDITY
    return 1.0


def evidence_strength(unit: Unit) -> float:
    """Restatement is not corroboration (0.35); a refutation is kept strong (0.9); otherwise 1.0."""
    if unit.echo_of:
        return ECHO_STRENGTH
    if unit.refutes:
        return REFUTING_STRENGTH
    return 1.0


def is_open(unit: Unit) -> bool:
    return unit.is_open_loop


def open_loop_weight(frame: ProjectFrame, work_type: str | None) -> float:
    """An open loop matters only when the work type has a use for unfinished work."""
    return 1.0 if work_type is not None and work_type in frame.open_loop_work_types else 0.0


def recency(unit: Unit, reference: datetime | None) -> float:
    """1 / (1 + age_days / 30) against the standpoint (else the newest date); 0 when undated."""
    if unit.created_at is None or reference is None:
        return 0.0
    days = max((reference - unit.created_at).total_seconds() / 86400.0, 0.0)
    return 1.0 / (1.0 + days / 30.0)


def recencies(units: Sequence[Unit], reference: datetime | None) -> list[float]:
    """recency() of each unit (unrounded)."""
    if reference is None:
        return [0.0] * len(units)
    out = []
    for unit in units:
        created = unit.created_at
        if created is None:
            out.append(0.0)
            continue
        days = max((reference - created).total_seconds() / 86400.0, 0.0)
        out.append(1.0 / (1.0 + days / 30.0))
    return out


def class_terms(preferences: Sequence[str]) -> dict[str, float]:
    """class_term() of every listed class (an unlisted class: 0.0)."""
    out: dict[str, float] = {}
    for tier, evidence_class in enumerate(preferences):
        out.setdefault(evidence_class, 1.0 - tier / max(len(preferences), 1))
    return out


def preference_tier(evidence_class: str, preferences: Sequence[str]) -> int | None:
    try:
        return list(preferences).index(evidence_class)
    except ValueError:
        return None


def class_term(evidence_class: str, preferences: Sequence[str]) -> float:
    tier = preference_tier(evidence_class, preferences)
    return 0.0 if tier is None else 1.0 - tier / max(len(preferences), 1)


def objective_term_ids(index: CorpusIndex, objective: str) -> tuple[np.ndarray, int]:
    """Term ids of the objective's words (length >= 3) known to the corpus, and the count of all
    such words.
    """
    words = sorted({t for t in tokenise(objective) if len(t) >= OBJECTIVE_TERM_MIN_LEN})
    return index.term_ids(words), len(words)


def _gather_terms(index: CorpusIndex, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    starts = index.term_offsets[positions]
    lengths = index.term_offsets[positions + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), lengths
    # flat indices into index.terms for every (candidate, term) pair, without a Python loop
    row_starts = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    flat = row_starts + np.arange(total)
    return index.terms[flat], lengths


def objective_overlap(index: CorpusIndex, positions: np.ndarray, objective: str) -> np.ndarray:
    """Share of the objective's words that occur in each unit."""
    ids, n_words = objective_term_ids(index, objective)
    if n_words == 0 or positions.size == 0 or ids.size == 0:
        return np.zeros(positions.size)
    terms, lengths = _gather_terms(index, positions)
    if terms.size == 0:
        return np.zeros(positions.size)
    where = np.minimum(np.searchsorted(ids, terms), ids.size - 1)
    hits = ids[where] == terms
    owners = np.repeat(np.arange(positions.size), lengths)
    return np.bincount(owners, weights=hits, minlength=positions.size) / n_words


def goal_relevance(class_terms: np.ndarray, overlap: np.ndarray) -> np.ndarray:
    """0.75 * class preference + 0.25 * min(2 * objective overlap, 1)."""
    return 0.75 * class_terms + 0.25 * np.minimum(overlap * 2.0, 1.0)


def _local_ids(terms: np.ndarray) -> tuple[int, np.ndarray]:
    """Dense 0..V-1 ids for the distinct values of `terms` (np.unique(return_inverse) without its
    overhead).
    """
    order = np.argsort(terms, kind="stable")
    ordered = terms[order]
    new = np.empty(ordered.size, dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    inverse = np.empty(ordered.size, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return int(new.sum()), inverse


def _column_ids(terms: np.ndarray, vocabulary: int) -> tuple[int, np.ndarray]:
    """_local_ids(terms) for term ids below `vocabulary`: the same dense ids (distinct values in
    ascending order), read off a mark per vocabulary entry instead of a sort when the vocabulary is
    not too large beside the terms (a sort otherwise)."""
    if vocabulary > 16 * terms.size:  # well below where a mark per entry costs what the sort does
        return _local_ids(terms)
    seen = np.zeros(vocabulary, dtype=bool)
    seen[terms] = True
    column = np.cumsum(seen) - 1
    return int(column[-1]) + 1, column[terms]


def jaccard_matrix(index: CorpusIndex, positions: np.ndarray) -> np.ndarray:
    """Pairwise Jaccard similarity of the units' distinct-term sets (bitsets and popcounts, no
    BLAS).
    """
    p = positions.size
    if p == 0:
        return np.zeros((0, 0))
    terms, lengths = _gather_terms(index, positions)
    if terms.size == 0:
        return np.zeros((p, p))
    v, local = _column_ids(terms, len(index.bm25.vocab))
    width = -(-v // 64) * 64
    bits = np.zeros((p, width), dtype=bool)
    bits[np.repeat(np.arange(p), lengths), local] = True
    words = np.packbits(bits, axis=1).view(np.uint64)
    inter = (
        np.bitwise_count(words[:, None, :] & words[None, :, :])
        .sum(axis=2, dtype=np.int64)
        .astype(np.float64)
    )
    sizes = lengths.astype(np.float64)
    union = sizes[:, None] + sizes[None, :] - inter
    out = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    np.fill_diagonal(out, 0.0)
    return out


def redundancy_before(jaccard: np.ndarray) -> np.ndarray:
    """For each candidate, its highest Jaccard against any candidate ahead of it in pool order."""
    p = jaccard.shape[0]
    if p == 0:
        return np.zeros(0)
    lower = np.tril(jaccard, k=-1)
    return lower.max(axis=1)


def adjacencies(index: CorpusIndex, units: Sequence[Unit], pool_ids: frozenset[str]) -> list[float]:
    """adjacency() of each unit (unrounded)."""
    neighbour_ids = index.neighbour_ids
    out = []
    for unit in units:
        neighbours = neighbour_ids.get(unit.id, ())
        if neighbours:
            out.append(sum(1 for n in neighbours if n in pool_ids) / len(neighbours))
        else:
            out.append(0.0)
    return out


def adjacency(index: CorpusIndex, unit_id: str, pool_ids: frozenset[str]) -> float:
    """Share of the unit's linked units (supersession, echo, support, refutation) that are also
    candidates.
    """
    neighbours = index.neighbour_ids.get(unit_id, ())
    if not neighbours:
        return 0.0
    return sum(1 for n in neighbours if n in pool_ids) / len(neighbours)
