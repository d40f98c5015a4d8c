"""Failure attribution against a ledger: each missed MUST unit and each admitted harmful or stale
unit gets E0..E6.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from .outputs import ContextTrace
from .reason_codes import REACHES_MODEL, Disposition, ReasonCode, Stage
from .serialisation import Serialisable

WANTED = ("MUST", "SHOULD")  # the ledger labels whose misses are attributed


class FailureCode(StrEnum):
    E0 = "E0"  # required evidence absent from memory
    E1 = "E1"  # present, but retrieval never surfaced it as a candidate
    E2 = "E2"  # surfaced but ruled ineligible
    E3 = "E3"  # eligible but lost in ranking or to the budget
    E4 = "E4"  # superseded or harmful evidence admitted
    E5 = "E5"  # coalescing damaged a needed distinction (rejected as redundant)
    E6 = "E6"  # good context supplied; the reader failed


DESCRIPTIONS: dict[FailureCode, str] = {
    FailureCode.E0: "required evidence absent from memory",
    FailureCode.E1: "present, but frame-conditioned retrieval never surfaced it",
    FailureCode.E2: "surfaced but ruled ineligible",
    FailureCode.E3: "eligible but lost during ranking or to the budget",
    FailureCode.E4: "superseded or harmful evidence admitted",
    FailureCode.E5: "coalescing damaged a needed distinction",
    FailureCode.E6: "good context supplied; the reader failed",
}


class Decided(Protocol):
    """What the classifier reads of a candidate: a CandidateRecord, a stored row, a funnel Outcome."""

    disposition: str
    reason_code: str
    eligible: bool


def missed_code(in_memory: bool, decided: Decided | None) -> FailureCode | None:
    """The E-code of a required (MUST or SHOULD) unit, or None when it reached the bundle: the one
    classifier of a miss.

    E0 not in memory; E1 never a candidate; E5 rejected as redundant (its id never reached the
    model); E2 ruled ineligible; E3 otherwise (eligible, then outranked, stopped or omitted for
    budget). A folded unit is not a miss: its id joined an admitted item with its source, and the
    metrics count it as recalled. attribute() and the loss funnel (engine.explain.funnel) both call
    it.
    """
    if not in_memory:
        return FailureCode.E0
    if decided is None:
        return FailureCode.E1
    if decided.disposition in (Disposition.ADMITTED, Disposition.FOLDED):
        return None
    if decided.reason_code == ReasonCode.REDUNDANT_WITH_ADMITTED:
        return FailureCode.E5
    if not decided.eligible:
        return FailureCode.E2
    return FailureCode.E3


@dataclass(frozen=True)
class UnitAttribution(Serialisable):
    unit_id: str
    label: str  # the ledger label (HARMFUL for stale units the ledger did not label)
    code: str
    stage: str  # the trace stage that decided it ("" when it was never a candidate)
    reason_code: str  # the trace reason code ("" when it was never a candidate)


@dataclass(frozen=True)
class Attribution(Serialisable):
    units: tuple[UnitAttribution, ...]  # sorted by (code, unit id)
    codes: tuple[str, ...]  # distinct codes, sorted

    def code_of(self, unit_id: str) -> str | None:
        for entry in self.units:
            if entry.unit_id == unit_id:
                return entry.code
        return None


def attribute(
    trace: ContextTrace,
    ledger: Mapping[str, str],
    corpus_ids: Collection[str],
    *,
    reader_failed: bool | None = None,
) -> Attribution:
    """Attribute failures to the stage that caused them.

    A missed MUST or SHOULD unit gets missed_code()'s E0, E1, E2, E3 or E5 (its label says which).
    An admitted (or folded) unit labelled HARMFUL, or one whose temporal validity was below 1 at the
    standpoint, is E4. E6 only when `reader_failed` is True (a recorded outcome: the answer failed
    although the evidence was present) and no MUST unit was missed and nothing was attributed E4.
    """
    by_id = {c.unit_id: c for c in trace.candidates}
    entries: list[UnitAttribution] = []
    for unit_id, label in sorted((u, lab) for u, lab in ledger.items() if lab in WANTED):
        c = by_id.get(unit_id)
        code = missed_code(unit_id in corpus_ids, c)
        if code is None:
            continue
        if c is None or code == FailureCode.E0:
            stage, reason = "", ""  # it never reached a stage
        else:
            stage, reason = c.stage, c.reason_code
        entries.append(UnitAttribution(unit_id, label, code.value, stage, reason))
    for c in sorted(trace.candidates, key=lambda r: r.unit_id):
        if c.disposition not in REACHES_MODEL:
            continue
        lab = ledger.get(c.unit_id, "DISTRACTOR")
        if lab == "HARMFUL" or c.signals.temporal_validity < 1.0:
            entries.append(
                UnitAttribution(c.unit_id, lab, FailureCode.E4.value, c.stage, c.reason_code)
            )
    # the context was good when no MUST unit was missed and nothing stale or harmful reached the
    # model, whatever its label (an admitted stale SHOULD unit is E4 too); SHOULD misses do not count
    spoiled = [e for e in entries if e.label == "MUST" or e.code == FailureCode.E4]
    if reader_failed and not spoiled:
        entries.append(UnitAttribution("", "", FailureCode.E6.value, Stage.READER.value, ""))
    entries.sort(key=lambda e: (e.code, e.unit_id))
    return Attribution(units=tuple(entries), codes=tuple(sorted({e.code for e in entries})))


class LossStage(StrEnum):
    """Where a MUST unit was lost, in pipeline order (the recall-at-every-stage table)."""

    ABSENT = "absent"  # E0: not in memory
    POOL = "pool"  # E1: in memory, never a candidate
    ELIGIBILITY = "eligibility"  # E2: a candidate, ruled ineligible
    RANKING = "ranking"  # E3 with room: filler ranked ahead of it took the budget it needed
    BUDGET = "budget"  # E3 without room: the wanted evidence ahead of it already filled the budget
    STOP = "stop"  # E3: the frame's admission stop rule ended the bundle before it
    REDUNDANCY = "redundancy"  # E5: rejected as a near-duplicate of an admitted item
    RECALLED = "recalled"  # admitted, or folded into an admitted item (the metric counts it)


LOSS_STAGES: tuple[str, ...] = tuple(stage.value for stage in LossStage)


def must_loss_stages(
    trace: ContextTrace,
    ledger: Mapping[str, str],
    corpus_ids: Collection[str],
    item_tokens: Mapping[str, int],
) -> dict[str, str]:
    """MUST unit id -> the LossStage where it was lost (or `recalled`).

    An eligible MUST unit that did not fit is split by what a perfect ranking could have done:
    `budget` when the routed envelope plus the admitted items carrying MUST or SHOULD units ranked
    ahead of it, plus its own text (unit_tokens), exceed the budget; otherwise `ranking` (the room
    went to filler ranked ahead of it). `item_tokens` maps admitted item ids to their tokens.
    """
    by_id = {c.unit_id: c for c in trace.candidates}
    wanted_items: dict[str, int | None] = {}  # admitted item id -> rank of its primary (None: routed)
    for c in trace.candidates:
        if c.item_id is None or c.item_id not in item_tokens or c.disposition not in REACHES_MODEL:
            continue
        if ledger.get(c.unit_id) in WANTED:
            primary = by_id.get(c.item_id.removeprefix("item-"))
            routed = primary is not None and primary.stage == Stage.ROUTING
            rank = None if routed or primary is None else primary.rank
            wanted_items.setdefault(c.item_id, rank)
    routed_tokens = sum(
        item_tokens[c.item_id]
        for c in trace.candidates
        if c.stage == Stage.ROUTING and c.item_id in item_tokens and c.item_id not in wanted_items
    )
    out: dict[str, str] = {}
    for unit_id in sorted(u for u, lab in ledger.items() if lab == "MUST"):
        c = by_id.get(unit_id)
        code = missed_code(unit_id in corpus_ids, c)
        if code is None:
            out[unit_id] = LossStage.RECALLED.value
        elif code == FailureCode.E0:
            out[unit_id] = LossStage.ABSENT.value
        elif code == FailureCode.E1:
            out[unit_id] = LossStage.POOL.value
        elif code == FailureCode.E2:
            out[unit_id] = LossStage.ELIGIBILITY.value
        elif code == FailureCode.E5:
            out[unit_id] = LossStage.REDUNDANCY.value
        elif c.reason_code == ReasonCode.ADMISSION_STOPPED:
            out[unit_id] = LossStage.STOP.value
        else:
            ahead = routed_tokens + sum(
                item_tokens[item]
                for item, rank in wanted_items.items()
                if rank is None or (c.rank is not None and rank < c.rank)
            )
            room = ahead + c.unit_tokens <= trace.budget_tokens
            out[unit_id] = (LossStage.RANKING if room else LossStage.BUDGET).value
    return out


def loss_counts(stages: Mapping[str, str]) -> dict[str, int]:
    """How many MUST units each LossStage holds, every stage present."""
    counts = dict.fromkeys(LOSS_STAGES, 0)
    for stage in stages.values():
        counts[stage] += 1
    return counts
