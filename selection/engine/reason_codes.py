"""Why a candidate ended where it did: stable string values, documented once in docs/reason-
codes.md.
"""

from __future__ import annotations

from enum import StrEnum


class ReasonCode(StrEnum):
    # admitted or folded (the unit's content or its id reaches the model)
    ADMITTED_WITHIN_BUDGET = "ADMITTED_WITHIN_BUDGET"
    ORACLE_LEDGER = "ORACLE_LEDGER"
    ECHO_FOLDED_INTO_ITEM = "ECHO_FOLDED_INTO_ITEM"
    # rejected by policy at eligibility
    OUT_OF_PROJECT_SCOPE = "OUT_OF_PROJECT_SCOPE"
    SUPERSEDED_SUCCESSOR_AVAILABLE = "SUPERSEDED_SUCCESSOR_AVAILABLE"
    CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE = "CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE"
    # rejected by policy at admission (C6)
    REDUNDANT_WITH_ADMITTED = "REDUNDANT_WITH_ADMITTED"
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


class Disposition(StrEnum):
    ADMITTED = "admitted"
    FOLDED = "folded"  # its id joined another item; counts as admitted in the metrics
    REJECTED = "rejected"  # a policy judgement (eligibility or redundancy)
    BUDGET_OMITTED = "budget_omitted"  # eligible and wanted, but it did not fit


REASON_DISPOSITION: dict[ReasonCode, Disposition] = {
    ReasonCode.ADMITTED_WITHIN_BUDGET: Disposition.ADMITTED,
    ReasonCode.ORACLE_LEDGER: Disposition.ADMITTED,
    ReasonCode.ECHO_FOLDED_INTO_ITEM: Disposition.FOLDED,
    ReasonCode.OUT_OF_PROJECT_SCOPE: Disposition.REJECTED,
    ReasonCode.SUPERSEDED_SUCCESSOR_AVAILABLE: Disposition.REJECTED,
    ReasonCode.CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE: Disposition.REJECTED,
    ReasonCode.REDUNDANT_WITH_ADMITTED: Disposition.REJECTED,
    ReasonCode.BUDGET_EXHAUSTED: Disposition.BUDGET_OMITTED,
}
