"""The glossary: every code and term a page shows, each with a one-line meaning (the tooltip) and
a paragraph (the glossary page). Words only; pure. Pages link each code to its entry through the
`code` template tag (selection.templatetags.glossary).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..attribution import DESCRIPTIONS, FailureCode
from ..conditions import CONDITIONS


@dataclass(frozen=True)
class Entry:
    key: str  # the code or term as pages show it; its anchor on the glossary page is anchor(key)
    group: str
    line: str  # one line: the tooltip
    more: str = ""


GROUPS = (
    ("conditions", "Conditions"),
    ("metrics", "Metrics the gates read"),
    ("reasons", "Reason codes: why a candidate was admitted or not"),
    ("routing", "Routing codes"),
    ("ecodes", "E-codes: why a needed unit was missed"),
    ("terms", "Terms"),
)

_CONDITION_MORE = {
    "C0": "The baseline every other condition is measured against: the query's own retrieval, nothing from the frame.",
    "C6": "The full pipeline, the one live selections and backtests run.",
    "CO": "Not a selection policy: the ceiling an evaluation compares against, reading the hidden labels.",
}

_REASONS = (
    ("ADMITTED_WITHIN_BUDGET", "admitted: eligible, ranked, and its item fitted in the budget left"),
    ("ORACLE_LEDGER", "admitted by the oracle (CO): a MUST or SHOULD unit of the hidden labels"),
    ("ECHO_FOLDED_INTO_ITEM", "folded: a restatement joined the item of the unit it restates"),
    ("NEAR_DUPLICATE_FOLDED", "folded: nearly the same words as an admitted unit, so it joined that item"),
    ("OUT_OF_PROJECT_SCOPE", "rejected: its project is not in the frame's scope"),
    ("SUPERSEDED_SUCCESSOR_AVAILABLE", "rejected: a newer unit replaces it and that successor is a candidate"),
    (
        "CLASS_ABSENT_AND_LOW_QUERY_RELEVANCE",
        "rejected: the work type does not list its class and the query ranks it low",
    ),
    ("REDUNDANT_WITH_ADMITTED", "rejected: it repeats an admitted unit and could not fold into it"),
    ("ADMISSION_STOPPED", "rejected: the frame's stop rule ended the bundle before the budget did"),
    ("BUDGET_EXHAUSTED", "left out: wanted, but its item did not fit in the budget left"),
    ("ROUTE_ALWAYS", "loaded first: a root unit, always part of the envelope"),
)

_ROUTING = (
    ("ROUTE_TASK", "loaded: the declared task category loads it"),
    ("ROUTE_PATH", "loaded: one of its path patterns matches a path of the request"),
    ("ROUTE_EXPLICIT", "loaded: the request named it as an overlay"),
    ("SKIP_TASK_MISMATCH", "skipped: another task category loads it"),
    ("SKIP_NO_PATH_MATCH", "skipped: none of its path patterns matches the request's paths"),
    ("SKIP_NOT_REQUESTED", "skipped: loaded only when asked for by name"),
    ("SKIP_SCOPE_MISSING", "skipped: the request gave no path or area, which its category needs"),
    ("MISSING_REQUIRED", "missing: the task category needs a unit the corpus lacks"),
    ("MISSING_OPTIONAL", "missing, not needed: the task category would load it if present"),
    ("ROUTE_INVALID", "invalid: the unit's routing metadata breaks the rules"),
    ("OMIT_BUDGET", "routed, but its item did not fit in the budget"),
    ("SUBJECT_FACET_CONFLICT", "two current units of one project say different things on one subject"),
    ("COMPLETE", "routing: everything the request needed was loaded"),
    ("INCOMPLETE", "routing: the request left out something its task needs (a path, an area) or a unit is missing"),
    ("AMBIGUOUS", "routing: more than one task category fits the request"),
    ("INVALID", "routing: a unit's routing metadata or a conflict makes the envelope invalid"),
)

_METRICS = (
    ("must_include_recall", "the share of a task's MUST units that reach the model"),
    ("precision", "the share of admitted units the task's labels want (MUST or SHOULD)"),
    ("leakage", "the share of admitted units from projects outside the frame's scope"),
    ("harmful_admission", "the share of admitted units the task's labels call HARMFUL"),
    ("redundancy", "the share of admitted units that restate another admitted unit"),
    ("tokens", "how many tokens the rendered bundle spends (its length / 4)"),
    ("max_drop", "a limit: the metric may fall by at most this much"),
    ("max_rise", "a limit: the metric may rise by at most this much"),
    ("max", "a limit: the metric may be at most this value"),
)

_TERMS = (
    (
        "class pull",
        "how many units of each preferred class are pulled into the candidates even when the query misses them",
        "The frame's guarantee that the classes a work type asks for are represented: the first unit pulled for "
        "a class is never stopped by the stop rule.",
    ),
    (
        "stop rule",
        "when a bundle stops before the budget: a floor, caps per class and for unlisted classes",
        "rule relative: inside a class, an item whose evidence is below floor × the best admitted in that class "
        "is stopped; the unlisted cap limits classes the work type does not list; the tier cap shrinks each "
        "class's room with its place in the preference order; the unlisted floor asks both the query and the "
        "objective to support an unlisted class. rule unlisted: the unlisted floor alone (the default for a "
        "frame that declares none). rule none: only the budget ends the bundle.",
    ),
    (
        "establishment",
        "how sure the work frame is of its work type: declared, inferred-confident, inferred-ambiguous or unknown",
        "A declared work type runs as named. An inferred one that is ambiguous or unknown runs a hedged "
        "condition whose name carries a suffix (see ~merged, ~soft, ~query, ~head).",
    ),
    ("~query", "ran query-only: the work type was not established, so no objective query, class pull or buckets"),
    ("~merged", "ran with the plausible work types' class lists merged: the work type was ambiguous"),
    ("~soft", "ran with a soft frame: it widened recall but excluded and reordered nothing"),
    ("~head", "hedged: the head of the query-only ranking was admitted ahead of the class buckets"),
    ("scope", "the projects whose units a selection may use; a unit from elsewhere is rejected"),
    ("disposition", "what happened to a candidate: admitted, folded, rejected or budget_omitted"),
    ("gate", "a test a proposed frame must pass in its backtest before it can be approved"),
    ("backtest", "every labelled task replayed under the current and the proposed frame, compared gate by gate"),
    ("corpus digest", "a fingerprint of the corpus's units: two traces with different digests read different memory"),
)


def anchor(key: str) -> str:
    """The glossary page's id for `key`: lower case, runs of other characters as one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-") or "term"


def _entries() -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for name, condition in CONDITIONS.items():
        out[name] = Entry(name, "conditions", condition.label, _CONDITION_MORE.get(name, ""))
    for key, line in _METRICS:
        out[key] = Entry(key, "metrics", line)
    for key, line in _REASONS:
        out[key] = Entry(key, "reasons", line)
    for key, line in _ROUTING:
        out[key] = Entry(key, "routing", line)
    for code in FailureCode:
        out[code.value] = Entry(code.value, "ecodes", DESCRIPTIONS[code])
    for key, line, *more in _TERMS:
        out[key] = Entry(key, "terms", line, more[0] if more else "")
    return out


ENTRIES: dict[str, Entry] = _entries()


def lookup(code: str) -> Entry | None:
    """The entry of a code as a page shows it; a hedged condition ("C6~merged~head") is its base
    condition with each suffix explained."""
    code = str(code or "")
    found = ENTRIES.get(code)
    if found is not None or "~" not in code:
        return found
    base, *suffixes = code.split("~")
    if base not in ENTRIES:
        return None
    words = [ENTRIES[base].line] + [ENTRIES[f"~{s}"].line for s in suffixes if f"~{s}" in ENTRIES]
    return Entry(base, "conditions", f"{code}: " + "; ".join(words))
