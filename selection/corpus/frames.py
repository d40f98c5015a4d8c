"""ProjectFrame mappings (corpus.yaml frames and proposal patches) checked into engine frames."""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import Any

from selection.corpus.places import Place, Report, describe
from selection.corpus.routing import ROUTING_FRAME_KEYS, check_routing_policy
from selection.engine.gates import GATES_KEYS, LIMIT_BOUNDS, Gate, Gates
from selection.engine.metrics import METRICS
from selection.engine.types import ProjectFrame

FRAME_KEYS = (
    "purpose",
    "objectives",
    "constraints",
    "scope",
    "default_classes",
    "class_pull",
    "work_types",
    "open_loop_work_types",
    "gates",
    *ROUTING_FRAME_KEYS,  # project extension: deterministic routing (docs/corpus-format.md)
)


def check_frame(
    value: Any, place: Place, report: Report, *, project: str, declared: Collection[str]
) -> ProjectFrame | None:
    """The engine's version-1 frame for `project`, or None after reporting every issue."""
    before = len(report)
    known, _extras = report.mapping(value, place, optional=FRAME_KEYS)
    if known is None:
        return None
    fields: dict[str, Any] = {}
    if "purpose" in known:
        fields["purpose"] = report.string(known["purpose"], place.at("purpose"))
    for key in ("objectives", "constraints"):
        if key in known:
            fields[key] = report.string_list(known[key], place.at(key))
    if "scope" in known:
        scope = report.identifier_list(known["scope"], place.at("scope"), "project slug")
        for index, slug in enumerate(scope or ()):
            if slug not in declared:
                report.add(
                    place.at("scope", index), f'project "{slug}" is not declared in corpus.yaml'
                )
        fields["scope"] = scope
    if "default_classes" in known:
        fields["default_classes"] = report.identifier_list(
            known["default_classes"], place.at("default_classes"), "class name"
        )
    if "class_pull" in known:
        fields["class_pull"] = report.integer(
            known["class_pull"], place.at("class_pull"), minimum=0
        )
    if "work_types" in known:
        fields["work_types"] = _work_types(known["work_types"], place.at("work_types"), report)
    if "open_loop_work_types" in known:
        fields["open_loop_work_types"] = report.identifier_list(
            known["open_loop_work_types"], place.at("open_loop_work_types"), "work type"
        )
    if "gates" in known:
        fields["gates"] = _gates(known["gates"], place.at("gates"), report)
    if any(key in known for key in ROUTING_FRAME_KEYS):
        declared_work_types = (
            {name for name, _ in fields["work_types"]} if fields.get("work_types") else set()
        )
        fields["routing"] = check_routing_policy(
            known, place, report, work_types=declared_work_types
        )
    if len(report) > before:
        return None
    return ProjectFrame(project=project, version=1, **fields)


def _work_types(
    value: Any, place: Place, report: Report
) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    if not isinstance(value, dict):
        report.add(
            place, f"expected a mapping of work type to ordered class names, got {describe(value)}"
        )
        return None
    pairs = []
    for name, classes in value.items():
        # keys here are work type names (data), so an "x-" key is a work type, not an extension
        checked_name = report.identifier(name, place.at(name), "work type")
        checked = report.identifier_list(classes, place.at(name), "class name")
        if checked_name is not None and checked is not None:
            pairs.append((checked_name, checked))
    # the engine keeps work types sorted by name; each preference list keeps its written order
    return tuple(sorted(pairs))


def _gates(value: Any, place: Place, report: Report) -> Gates | None:
    known, _extras = report.mapping(value, place, optional=GATES_KEYS)
    if known is None:
        return None
    fields: dict[str, Any] = {}
    if "primary" in known:
        fields["primary"] = report.choice(known["primary"], place.at("primary"), METRICS)
    if "min_improvement" in known:
        fields["min_improvement"] = report.number(
            known["min_improvement"], place.at("min_improvement")
        )
    if "limits" in known:
        entries = report.items(known["limits"], place.at("limits"))
        limits = [_limit(item, at, report) for at, item in entries or ()]
        fields["limits"] = tuple(limits) if entries is not None and None not in limits else None
    if any(item is None for item in fields.values()):
        return None
    return Gates(**fields)


def _limit(value: Any, place: Place, report: Report) -> Gate | None:
    known, _extras = report.mapping(value, place, required=("metric",), optional=LIMIT_BOUNDS)
    if known is None or "metric" not in known:
        return None
    metric = report.choice(known["metric"], place.at("metric"), METRICS)
    bounds = {key: report.number(known[key], place.at(key)) for key in LIMIT_BOUNDS if key in known}
    if not bounds:
        report.add(
            place, f"a limit needs a bound: one of {', '.join(LIMIT_BOUNDS)}", field="metric"
        )
        return None
    if metric is None or None in bounds.values():
        return None
    return Gate(metric=metric, **bounds)


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON Merge Patch (RFC 7386): mappings merge by key, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
