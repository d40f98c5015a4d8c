"""A project frame's settings in plain words, field by field, for the project page: the stop rule
(with the engine's default when the frame declares none), how work frames are established, the
bundle's order, approval, routing and anything else the frame carries. Pure; reads the frame
snapshot as stored (a mapping in the interchange format).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..types import DEFAULT_UNLISTED_FLOOR, AdmissionPolicy, EstablishmentPolicy

# the fields the project page shows in their own sections
SHOWN_ELSEWHERE = frozenset(
    {
        "purpose",
        "objectives",
        "constraints",
        "scope",
        "default_classes",
        "class_pull",
        "work_types",
        "open_loop_work_types",
        "gates",
    }
)


@dataclass(frozen=True)
class Setting:
    key: str  # the frame field, as the editor and the interchange format name it
    label: str
    lines: tuple[str, ...]
    declared: bool  # False: the frame leaves it out and the engine's default applies


def _num(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def stop_rule(admission: Mapping | None) -> Setting:
    if not admission:
        floor = _num(DEFAULT_UNLISTED_FLOOR)
        return Setting(
            "admission",
            "Stop rule",
            (
                "Not declared: the engine's default applies (rule unlisted).",
                f"A unit of a class the work type does not list is admitted only when both the query and the "
                f"objective support it at least {floor} (unlisted floor {floor}).",
                "Nothing else stops a bundle before the budget.",
            ),
            False,
        )
    base = AdmissionPolicy()
    rule = admission.get("rule", base.rule)
    if rule == "none":
        return Setting("admission", "Stop rule", ("Rule none: only the budget ends a bundle.",), True)
    if rule == "unlisted":
        floor = _num(admission.get("unlisted_floor") or DEFAULT_UNLISTED_FLOOR)
        return Setting(
            "admission",
            "Stop rule",
            (
                f"Rule unlisted: a unit of a class the work type does not list is admitted only when both the "
                f"query and the objective support it at least {floor} (unlisted floor {floor}).",
            ),
            True,
        )
    floor = _num(admission.get("floor", base.floor))
    unlisted = admission.get("unlisted", base.unlisted)
    lines = [
        f"Rule relative, floor {floor}: inside a class, a unit whose evidence is below {floor} × the best "
        "admitted in that class is stopped.",
        f"Unlisted classes: at most {unlisted} unit{'s' if unlisted != 1 else ''} of classes the work type "
        f"does not list (unlisted {unlisted}).",
    ]
    cap = admission.get("tier_cap")
    if cap is not None:
        lines.append(
            f"Tier cap {cap}: the most preferred class admits at most {cap} units, the second "
            f"{-(-cap // 2)}, the third {-(-cap // 3)}, … (ceil({cap} / place))."
        )
    else:
        lines.append("No tier cap: a class's room does not shrink with its place in the order.")
    unlisted_floor = admission.get("unlisted_floor")
    if unlisted_floor is not None:
        lines.append(
            f"Unlisted floor {_num(unlisted_floor)}: an unlisted class needs both the query and the objective "
            f"to support it at least {_num(unlisted_floor)}."
        )
    lines.append("Never stopped: routed units, and the first unit the class pull brings in for a class.")
    return Setting("admission", "Stop rule", tuple(lines), True)


def establishment(value: Mapping | None) -> Setting:
    base = EstablishmentPolicy()
    value = value or {}
    builder = value.get("builder", base.builder)
    ambiguous = value.get("ambiguous", base.ambiguous)
    unknown = value.get("unknown", base.unknown)
    head = value.get("query_head", base.query_head)
    ways = {
        "merge": "the plausible work types' class lists are merged",
        "soft": "the frame widens recall but excludes and reorders nothing",
        "query": "the selection runs query-only within the scope",
    }
    lines = [
        f"When a request names no work type, the {builder} frame builder infers one"
        if builder != "declared"
        else "A request names its work type; none is inferred (builder declared).",
        f"When the inferred work type is ambiguous, {ways.get(ambiguous, ambiguous)} (ambiguous {ambiguous}).",
        f"When it is unknown, {ways.get(unknown, unknown)} (unknown {unknown}).",
        f"An inferred frame keeps {_num(head)} of the budget for what the query alone finds first"
        if head
        else "No budget is kept for the query's own first hits (query_head 0).",
    ]
    return Setting("establishment", "Establishing the work type", tuple(lines), bool(value))


def bundle_order(value) -> Setting:
    if value == "stable":
        line = "Stable: inside a class, admitted units appear in id order whatever the query."
    else:
        line = "By rank: inside a class, admitted units appear best first."
    return Setting("bundle_order", "Bundle order", (line,), value is not None)


def approval(value: Mapping | None) -> Setting:
    value = value or {}
    n = value.get("required_approvals", 1)
    lines = [f"{n} reviewer approval{'s' if n != 1 else ''} needed before a promotion."]
    if value.get("rejection_blocks", True):
        lines.append("A rejection blocks the promotion.")
    if value.get("approver_may_promote", False):
        lines.append("The lead who approved may also promote.")
    return Setting("approval", "Approval", tuple(lines), bool(value))


def routing(frame: Mapping) -> Setting | None:
    categories = frame.get("task_categories") or {}
    if not categories and not frame.get("modules"):
        return None
    lines = []
    for name, entry in sorted(categories.items()):
        entry = entry if isinstance(entry, Mapping) else {}
        loads = ", ".join(entry.get("load") or ()) or "nothing"
        types = ", ".join(entry.get("work_types") or ()) or "any work type"
        lines.append(f"Task category {name}: for {types}, always loads {loads}.")
    if frame.get("modules"):
        lines.append(f"{len(frame['modules'])} named module(s) of units can be asked for by name.")
    return Setting("task_categories", "Routing", tuple(lines), True)


def frame_settings(frame: Mapping) -> tuple[Setting, ...]:
    """Every frame field the page does not show elsewhere, in words, the engine's defaults named."""
    rows = [
        stop_rule(frame.get("admission")),
        establishment(frame.get("establishment")),
        bundle_order(frame.get("bundle_order")),
        approval(frame.get("approval")),
    ]
    route = routing(frame)
    if route is not None:
        rows.append(route)
    known = SHOWN_ELSEWHERE | {"admission", "establishment", "bundle_order", "approval"}
    known |= {"task_categories", "modules", "explicit_only", "activation"}
    for key in sorted(k for k in frame if k not in known):
        rows.append(Setting(key, key, (f"{frame[key]}",), True))
    return tuple(rows)
