"""What a routing report says to people and scripts: strict exit status, diff rows, JSON summary."""

from __future__ import annotations

from .codes import ROUTING_BOUNDED, Completeness, RouteCode, RouteDisposition
from .types import RoutingReport


def not_loaded(report: RoutingReport) -> frozenset[str]:
    """Units routing evaluated and did not load (skipped, missing, invalid)."""
    return frozenset(d.unit for d in report.dispositions if d.disposition != RouteDisposition.LOADED)


def barred_units(report: RoutingReport) -> frozenset[str]:
    """What ranked retrieval may not admit: under "bounded", every unit routing did not load."""
    return not_loaded(report) if report.mode == ROUTING_BOUNDED else frozenset()


def strict_refusal(report: RoutingReport) -> tuple[int, str]:
    """(exit status, reason) under strict routing: 0 when a bundle may be produced.

    1 for INCOMPLETE or AMBIGUOUS; 2 for INVALID or a structural conflict.
    """
    if report.completeness == Completeness.INVALID or report.conflicts:
        if report.conflicts:
            names = "; ".join(", ".join(c.units) for c in report.conflicts)
            return 2, f"structural conflict ({names}): a person must decide which unit governs"
        return 2, "routing is INVALID: " + "; ".join(report.problems)
    if report.completeness != Completeness.COMPLETE:
        return 1, f"routing is {report.completeness}: " + "; ".join(report.problems)
    return 0, ""


def routing_header(report: RoutingReport | None) -> dict[str, str]:
    """The routing rows of a trace's header, as trace diffs compare them (one row per unit)."""
    if report is None:
        return {}
    inputs = report.inputs
    rows = {
        "routing completeness": report.completeness,
        "routing task category": inputs.task_category or "",
        "routing paths": ", ".join(inputs.paths),
        "routing overlays": ", ".join(inputs.overlays),
        "routing strict": "yes" if inputs.strict else "no",
        "routing policy": report.mode,
        "routing ranked in": ", ".join(report.ranked_in),
        "routing refused": report.refusal,
        "routing conflicts": "; ".join(", ".join(c.units) for c in report.conflicts),
        "routing budget omissions": ", ".join(report.budget_omissions),
    }
    for d in report.dispositions:
        rows[f"routing {d.unit}"] = f"{d.disposition} {d.reason}"
    for d in report.local:
        rows[f"routing local {d.unit}"] = d.outcome
    return rows


def routing_summary(report: RoutingReport) -> dict:
    """The `routing` object of `select --json` and of the API: a stable shape scripts rely on."""
    return {
        "completeness": report.completeness,
        "policy": report.mode,
        "work_type": report.work_type,
        "dispositions": [
            {"unit": d.unit, "disposition": d.disposition, "reason": d.reason} for d in report.dispositions
        ],
        "conflicts": [{"code": c.code, "units": list(c.units)} for c in report.conflicts],
        "budget_omissions": [{"unit": uid, "reason": RouteCode.OMIT_BUDGET.value} for uid in report.budget_omissions],
        "local": [{"unit": d.unit, "outcome": d.outcome, "detail": d.detail} for d in report.local],
        "ranked_in": list(report.ranked_in),
        "problems": list(report.problems),
        "refused": report.refused,
        "refusal": report.refusal,
    }
