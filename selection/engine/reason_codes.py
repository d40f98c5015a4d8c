"""The engine's vocabulary, defined once: reason codes, stages and dispositions as enums with stable
string values (documented in docs/reason-codes.md); code compares against these, never literals.
"""

from __future__ import annotations

from enum import StrEnum


class ReasonCode(StrEnum):
    # admitted or folded (the unit's content or its id reaches the model)
    ADMITTED_WITHIN_BUDGET = "ADMITTED_WITHIN_BUDGET"
    ORACLE_LEDGER = "ORACLE_LEDGER"
    ECHO_FOLDED_INTO_ITEM = "ECHO_FOLDED_INTO_ITEM"
    NEAR_DUPLICATE_FOLDED = "NEAR_DUPLICATE_FOLDED"  # C6: folded into the admitted item it restates
    # rejected by policy at eligibility
    OUT_OF_PROJECT_SCOPE = "OUT_OF_PROJECT_SCOPE"
    SUPERSEDED_SUCCESSOR_AVAILABLE = "SUPERSEDED_SUCCESSOR_AVAILABLE"
    CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE = "CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE"
    # rejected by policy at admission (C6)
    REDUNDANT_WITH_ADMITTED = "REDUNDANT_WITH_ADMITTED"
    ADMISSION_STOPPED = "ADMISSION_STOPPED"  # the frame's stop rule: weak marginal evidence
    # omitted for lack of budget: not a policy judgement
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"


class Stage(StrEnum):
    ROUTING = "routing"  # the baseline envelope: root, task, path and explicit routes
    RETRIEVAL = "retrieval"
    SIGNALS = "signals"
    ELIGIBILITY = "eligibility"
    RANKING = "ranking"
    COALESCING = "coalescing"
    BUDGET = "budget"
    ORACLE = "oracle"
    READER = "reader"  # E6 only: the model that read the bundle, after every pipeline stage


class Disposition(StrEnum):
    ADMITTED = "admitted"
    FOLDED = "folded"  # its id joined another item; counts as admitted in the metrics
    REJECTED = "rejected"  # a policy judgement (eligibility or redundancy)
    BUDGET_OMITTED = "budget_omitted"  # eligible and wanted, but it did not fit


class CoalescingKind(StrEnum):
    """What one reversible coalescing step did (CoalescingOp.op)."""

    FOLD_ECHO = "fold_echo"  # a restatement joined its original's item
    FOLD_NEAR_DUPLICATE = "fold_near_duplicate"  # C6: a near-duplicate joined the item it restates
    PRESERVE_DISAGREEMENT = "preserve_disagreement"  # a refuting item kept beside its target
    SUPERSESSION_NOTE = "supersession_note"  # a superseded unit became a note on its successor


# the dispositions whose unit reaches the model (folded: its id joined another item)
REACHES_MODEL: tuple[Disposition, ...] = (Disposition.ADMITTED, Disposition.FOLDED)


REASON_DISPOSITION: dict[ReasonCode, Disposition] = {
    ReasonCode.ADMITTED_WITHIN_BUDGET: Disposition.ADMITTED,
    ReasonCode.ORACLE_LEDGER: Disposition.ADMITTED,
    ReasonCode.ECHO_FOLDED_INTO_ITEM: Disposition.FOLDED,
    ReasonCode.NEAR_DUPLICATE_FOLDED: Disposition.FOLDED,
    ReasonCode.OUT_OF_PROJECT_SCOPE: Disposition.REJECTED,
    ReasonCode.SUPERSEDED_SUCCESSOR_AVAILABLE: Disposition.REJECTED,
    ReasonCode.CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE: Disposition.REJECTED,
    ReasonCode.REDUNDANT_WITH_ADMITTED: Disposition.REJECTED,
    ReasonCode.ADMISSION_STOPPED: Disposition.REJECTED,
    ReasonCode.BUDGET_EXHAUSTED: Disposition.BUDGET_OMITTED,
}
