"""The standard each kind of change is held to: the frame's `gates` keys `held_to` and `margin`.

superiority (the primary metric must rise), non_inferiority (it may not fall by more than the
margin at the low end of its 95 % interval) or review_only (a change that touches no selection
input: reviewed, not gated). The corpus reader checks them (check_gate_standards, from the frame
checker's gates); governance reads them (gate_standards); the engine's Gates does not carry them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from selection.corpus.places import Place, Report

GATE_STANDARD_KEYS = ("held_to", "margin")
CHANGE_KINDS = ("change", "rebase", "rollback", "neutral")
STANDARDS = ("superiority", "non_inferiority", "review_only")
DEFAULT_HELD_TO = {
    "change": "superiority",
    "rebase": "superiority",
    "rollback": "non_inferiority",
    "neutral": "review_only",
}


@dataclass(frozen=True)
class GateStandards:
    """The standard each kind of change is held to, and the non-inferiority margin."""

    held_to: tuple[tuple[str, str], ...] = tuple(DEFAULT_HELD_TO.items())
    margin: float = 0.0

    def standard(self, kind: str) -> str:
        return dict(self.held_to).get(kind, DEFAULT_HELD_TO.get(kind, "superiority"))


def gate_standards(gates: Mapping[str, Any] | None) -> GateStandards:
    """The standards a (valid) frame's `gates` mapping declares; defaults for what it leaves out."""
    gates = gates or {}
    declared = gates.get("held_to") or {}
    held = {**DEFAULT_HELD_TO, **{k: v for k, v in declared.items() if k in CHANGE_KINDS}}
    return GateStandards(
        held_to=tuple((kind, held[kind]) for kind in CHANGE_KINDS),
        margin=float(gates.get("margin") or 0.0),
    )


def check_gate_standards(known: Mapping[str, Any], place: Place, report: Report) -> bool:
    """held_to: a kind of change -> its standard; review_only only for a neutral change (one that
    touches no selection input), so no edit of what selects can skip the gates. margin: in [0, 1]."""
    ok = True
    if "held_to" in known:
        held, _extras = report.mapping(known["held_to"], place.at("held_to"), optional=CHANGE_KINDS)
        if held is None:
            return False
        for kind, value in held.items():
            chosen = report.choice(value, place.at("held_to", kind), STANDARDS)
            if chosen is None:
                ok = False
            elif chosen == "review_only" and kind != "neutral":
                report.add(
                    place.at("held_to", kind),
                    f"a {kind} changes what selects, so it cannot be held to review only: "
                    "choose superiority or non_inferiority",
                )
                ok = False
    if "margin" in known:
        margin = report.number(known["margin"], place.at("margin"))
        if margin is not None and not 0.0 <= margin <= 1.0:
            report.add(
                place.at("margin"), f"must be between 0 and 1 (how far a no-worse change may fall), got {margin}"
            )
            margin = None
        ok = ok and margin is not None
    return ok
