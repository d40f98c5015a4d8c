"""The frame's routing keys (project extension, docs/corpus-format.md) and a task's `routing:`
block (corpus format 1.1), checked into the engine's routing types.
"""

from __future__ import annotations

from typing import Any

from selection.corpus.places import Place, Report, describe
from selection.engine.routing.codes import (
    ACTIVATION_TRIGGERS,
    ACTIVATIONS,
    ROUTING_ENVELOPE,
    ROUTING_MODES,
    TRIGGER_TASK,
)
from selection.engine.routing.types import RoutingInputs, RoutingPolicy, TaskCategory

# `routing`: what routing bounds, "envelope" (the default) or "bounded" (docs/routing.md)
ROUTING_FRAME_KEYS = ("task_categories", "modules", "explicit_only", "activation", "routing")
CATEGORY_KEYS = ("work_types", "load", "load_if_present", "needs_scope")
TASK_ROUTING_KEYS = ("task_category", "paths", "overlays")


def check_routing_policy(
    known: dict[str, Any], place: Place, report: Report, *, work_types: set[str] | None
) -> RoutingPolicy | None:
    """The RoutingPolicy of a frame mapping's routing keys; None after reporting an issue."""
    before = len(report)
    categories: list[TaskCategory] = []
    if "task_categories" in known:
        value = known["task_categories"]
        at = place.at("task_categories")
        if not isinstance(value, dict):
            report.add(at, f"expected a mapping of task category to work types, got {describe(value)}")
        else:
            for name, spec in value.items():
                category = _category(name, spec, at.at(name), report, work_types)
                if category is not None:
                    categories.append(category)
    modules: list[tuple[str, tuple[str, ...]]] = []
    if "modules" in known:
        value = known["modules"]
        at = place.at("modules")
        if not isinstance(value, dict):
            report.add(at, f"expected a mapping of module name to unit ids, got {describe(value)}")
        else:
            for name, ids in value.items():
                checked = report.identifier_list(ids, at.at(name), "unit id")
                if isinstance(name, str) and name.strip() and checked is not None:
                    modules.append((name, checked))
                elif not (isinstance(name, str) and name.strip()):
                    report.add(at, f"module name {describe(name)} must be a non-empty string")
    explicit: tuple[str, ...] = ()
    if "explicit_only" in known:
        explicit = report.string_list(known["explicit_only"], place.at("explicit_only")) or ()
    activation: list[tuple[str, str]] = []
    if "activation" in known:
        activation = _activation(known["activation"], place.at("activation"), report, categories, explicit)
    mode = ROUTING_ENVELOPE
    if "routing" in known:
        mode = report.choice(known["routing"], place.at("routing"), ROUTING_MODES)
    if len(report) > before:
        return None
    return RoutingPolicy(
        task_categories=tuple(sorted(categories, key=lambda c: c.name)),
        modules=tuple(sorted(modules)),
        explicit=tuple(sorted(set(explicit))),
        activation=tuple(sorted(activation)),
        mode=mode,
    )


def _activation(
    value: Any, place: Place, report: Report, categories: list[TaskCategory], explicit: tuple[str, ...]
) -> list[tuple[str, str]]:
    """`activation`: module name or unit id -> kind; a kind admits only the triggers it names."""
    if not isinstance(value, dict):
        report.add(place, f"expected a mapping of module name to activation kind, got {describe(value)}")
        return []
    out: list[tuple[str, str]] = []
    for name, kind in value.items():
        at = place.at(name)
        if not (isinstance(name, str) and name.strip()):
            report.add(place, f"module name {describe(name)} must be a non-empty string")
        elif kind not in ACTIVATIONS:
            report.add(at, f"activation {describe(kind)} is not one of {', '.join(ACTIVATIONS)}")
        elif TRIGGER_TASK not in ACTIVATION_TRIGGERS[kind] and (
            loader := next((c.name for c in categories if name in c.load or name in c.load_if_present), None)
        ):
            report.add(at, f'activation "{kind}" admits no task trigger, but task category "{loader}" loads {name}')
        elif name in explicit and kind != "explicit-only":
            report.add(at, f'{name} is in explicit_only, but its activation is "{kind}"')
        else:
            out.append((name, kind))
    return out


def _category(name: Any, spec: Any, place: Place, report: Report, work_types: set[str] | None) -> TaskCategory | None:
    checked_name = report.identifier(name, place, "task category")
    if isinstance(spec, list):
        spec = {"work_types": spec}
    known, _extras = report.mapping(spec, place, optional=CATEGORY_KEYS)
    if known is None or checked_name is None:
        return None
    fields: dict[str, Any] = {}
    if "work_types" in known:
        names = report.identifier_list(known["work_types"], place.at("work_types"), "work type")
        for index, wt in enumerate(names or ()):
            if work_types is not None and wt not in work_types:
                report.add(place.at("work_types", index), f'work type "{wt}" is not declared in work_types')
        fields["work_types"] = names
    for key in ("load", "load_if_present"):
        if key in known:
            fields[key] = report.string_list(known[key], place.at(key))
    if "needs_scope" in known:
        fields["needs_scope"] = report.boolean(known["needs_scope"], place.at("needs_scope"))
    if any(v is None for v in fields.values()):
        return None
    return TaskCategory(name=checked_name, **fields)


def check_task_routing(value: Any, place: Place, report: Report) -> RoutingInputs | None:
    """A task's `routing:` block: task_category, paths, overlays (strict and no_local are per run)."""
    known, _extras = report.mapping(value, place, optional=TASK_ROUTING_KEYS)
    if known is None:
        return None
    before = len(report)
    category = None
    if "task_category" in known:
        category = report.identifier(known["task_category"], place.at("task_category"), "task category")
    paths = report.string_list(known["paths"], place.at("paths")) if "paths" in known else ()
    overlays = report.string_list(known["overlays"], place.at("overlays")) if "overlays" in known else ()
    if len(report) > before:
        return None
    return RoutingInputs(task_category=category, paths=paths or (), overlays=overlays or ())


def routing_inputs_of(document: dict[str, Any] | None) -> RoutingInputs:
    """RoutingInputs from a stored (already checked) `routing:` block; empty when there is none."""
    doc = document or {}
    return RoutingInputs(
        task_category=doc.get("task_category") or None,
        paths=tuple(doc.get("paths") or ()),
        overlays=tuple(doc.get("overlays") or ()),
    )


def routing_inputs_document(inputs: RoutingInputs) -> dict[str, Any]:
    """The `routing:` block as stored on a Task and written to tasks.yaml (keys only when set)."""
    doc: dict[str, Any] = {}
    if inputs.task_category:
        doc["task_category"] = inputs.task_category
    if inputs.paths:
        doc["paths"] = list(inputs.paths)
    if inputs.overlays:
        doc["overlays"] = list(inputs.overlays)
    return doc
