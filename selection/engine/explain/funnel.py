"""Loss funnel: where the MUST units of a ledger were lost, stage by stage, each stage an E-code.

A unit's stage comes from attribution.missed_code, so the funnel and the attribution never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from ..attribution import FailureCode, missed_code
from ..outputs import CandidateRecord


class FunnelStage(StrEnum):
    """Where a MUST unit was lost; every stage but the last is one E-code of missed_code()."""

    ABSENT = "absent"
    NEVER_SURFACED = "never_surfaced"
    INELIGIBLE = "ineligible"
    LOST = "lost"
    FOLDED = "folded"
    ADMITTED = "admitted"


# (key, E-code, label); the order is the pipeline's, the last one is success
FUNNEL_STAGES: tuple[tuple[FunnelStage, str, str], ...] = (
    (FunnelStage.ABSENT, FailureCode.E0, "absent from memory"),
    (FunnelStage.NEVER_SURFACED, FailureCode.E1, "never surfaced by retrieval"),
    (FunnelStage.INELIGIBLE, FailureCode.E2, "ruled ineligible"),
    (FunnelStage.LOST, FailureCode.E3, "lost in ranking or to the budget"),
    (FunnelStage.FOLDED, FailureCode.E5, "rejected as redundant"),
    (FunnelStage.ADMITTED, "", "admitted"),
)
FUNNEL_KEYS = tuple(key for key, _, _ in FUNNEL_STAGES)
_STAGE_OF_CODE = {code: key for key, code, _ in FUNNEL_STAGES if code}


@dataclass(frozen=True)
class Outcome:
    """The three facts about one candidate the funnel needs (a CandidateRecord, or a DB row)."""

    disposition: str
    reason_code: str
    eligible: bool


@dataclass(frozen=True)
class FunnelRow:
    key: str
    code: str
    label: str
    count: int
    share: float  # of the MUST units
    remaining: int  # MUST units still alive after this stage (admitted for the last row)

    @property
    def success(self) -> bool:
        return self.key == FunnelStage.ADMITTED


@dataclass(frozen=True)
class LossFunnel:
    must: int  # MUST units counted (over every trace summed)
    counts: tuple[tuple[str, int], ...]  # in FUNNEL_KEYS order
    units: tuple[tuple[str, str], ...] = ()  # (unit id, stage key), single traces only
    traces: int = 1

    def count(self, key: str) -> int:
        return dict(self.counts)[key]

    def stage_of(self, unit_id: str) -> str | None:
        return dict(self.units).get(unit_id)

    @property
    def rows(self) -> tuple[FunnelRow, ...]:
        alive = self.must
        rows = []
        for key, code, label in FUNNEL_STAGES:
            n = self.count(key)
            if key != FunnelStage.ADMITTED:
                alive -= n
            rows.append(
                FunnelRow(
                    key,
                    code,
                    label,
                    n,
                    n / self.must if self.must else 0.0,
                    alive if key != FunnelStage.ADMITTED else n,
                )
            )
        return tuple(rows)

    @property
    def lost(self) -> int:
        return self.must - self.count(FunnelStage.ADMITTED)


def funnel_stage(unit_id: str, outcome: Outcome | None, corpus_ids: Iterable[str] | None) -> str:
    """The funnel stage of one MUST unit: attribution's own classifier, missed_code()."""
    code = missed_code(corpus_ids is None or unit_id in corpus_ids, outcome)
    return FunnelStage.ADMITTED if code is None else _STAGE_OF_CODE[code]


def loss_funnel(
    outcomes: Mapping[str, Outcome],
    ledger: Mapping[str, str],
    corpus_ids: Iterable[str] | None,
) -> LossFunnel:
    """Of the ledger's MUST units, how many were absent, never surfaced, ineligible, lost, folded
    or admitted. `outcomes`: unit id -> Outcome for every candidate of one trace.
    """
    ids = frozenset(corpus_ids) if corpus_ids is not None else None
    units = tuple(
        (uid, funnel_stage(uid, outcomes.get(uid), ids))
        for uid in sorted(u for u, label in ledger.items() if label == "MUST")
    )
    counts = {key: 0 for key in FUNNEL_KEYS}
    for _, key in units:
        counts[key] += 1
    return LossFunnel(len(units), tuple(counts.items()), units)


def trace_outcomes(candidates: Iterable[CandidateRecord]) -> dict[str, Outcome]:
    return {c.unit_id: Outcome(c.disposition, c.reason_code, c.eligible) for c in candidates}


def sum_funnels(funnels: Iterable[LossFunnel]) -> LossFunnel:
    """The funnel of an evaluation or a backtest side: counts summed over its traces."""
    counts = {key: 0 for key in FUNNEL_KEYS}
    must = traces = 0
    for f in funnels:
        must += f.must
        traces += f.traces
        for key, n in f.counts:
            counts[key] += n
    return LossFunnel(must, tuple(counts.items()), (), traces)
