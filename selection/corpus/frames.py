"""ProjectFrame mappings (corpus.yaml frames and proposal patches) checked into engine frames."""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from selection.corpus.gate_standards import GATE_STANDARD_KEYS, check_gate_standards
from selection.corpus.places import Place, Report, describe
from selection.corpus.routing import ROUTING_FRAME_KEYS, check_routing_policy
from selection.engine.builders import BUILDERS
from selection.engine.gates import GATES_KEYS, LIMIT_BOUNDS, Gate, Gates
from selection.engine.metrics import METRICS
from selection.engine.types import (
    ADMISSION_RULES,
    AMBIGUOUS_BEHAVIOURS,
    CALIBRATIONS,
    DEFAULT_THRESHOLDS,
    ORDER_RULES,
    UNKNOWN_BEHAVIOURS,
    AdmissionPolicy,
    BuilderThresholds,
    EstablishmentPolicy,
    ProjectFrame,
    WorkTypeProfile,
)

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
    "establishment",  # project addition (docs/corpus-format.md): frame builder and abstention
    "admission",  # project addition (docs/corpus-format.md): when a C6 bundle stops early
    "bundle_order",  # project addition (docs/corpus-format.md): the rendered bundle's order
    "approval",  # project extension (trust): see docs/corpus-format.md
    "memory",  # project extension: how memory writes are admitted (docs/memory-writes.md)
    *ROUTING_FRAME_KEYS,  # project extension: deterministic routing (docs/corpus-format.md)
)
WORK_TYPE_KEYS = ("classes", "description", "cues")  # the 1.1 long form of a work type
ESTABLISHMENT_KEYS = (
    "builder",
    "ambiguous",
    "unknown",
    "thresholds",
    "calibration",
    "min_calibrated",
    "query_head",
)
ADMISSION_KEYS = ("rule", "floor", "unlisted", "tier_cap", "unlisted_floor")
THRESHOLD_KEYS = ("margin", "min_score")
APPROVAL_KEYS = ("required_approvals", "rejection_blocks", "approver_may_promote")
MAX_REQUIRED_APPROVALS = 20
MEMORY_KEYS = ("admission",)
# direct: a write is active at once; candidate: an agent's write waits in the "To admit" queue
MEMORY_ADMISSIONS = ("direct", "candidate")
DEFAULT_MEMORY_ADMISSION = "direct"


@dataclass(frozen=True)
class ApprovalPolicy:
    """How a proposal of this project is reviewed before promotion (the frame's `approval` key).

    The defaults, for a frame without the key: one approval, a rejection blocks, and the approver
    may promote. The author of a proposal never counts as one of its approvers.
    """

    required_approvals: int = 1
    rejection_blocks: bool = True
    approver_may_promote: bool = True


def approval_policy(snapshot: Mapping[str, Any] | None) -> ApprovalPolicy:
    """The policy a (valid) frame snapshot declares; defaults for keys it leaves out."""
    declared = (snapshot or {}).get("approval") or {}
    return ApprovalPolicy(**{k: declared[k] for k in APPROVAL_KEYS if k in declared})


def memory_admission(snapshot: Mapping[str, Any] | None) -> str:
    """How the (valid) frame snapshot admits memory writes: "direct" unless its `memory` says."""
    declared = (snapshot or {}).get("memory") or {}
    return declared.get("admission", DEFAULT_MEMORY_ADMISSION)


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
        if scope == ():
            # fail closed, and say so: an empty scope must not quietly mean "this project"
            report.add(
                place.at("scope"),
                "an empty scope would admit no unit at all: name at least one project, "
                "or leave the key out for the project's own units",
            )
            scope = None
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
        checked = _work_types(known["work_types"], place.at("work_types"), report)
        fields["work_types"] = None if checked is None else checked[0]
        fields["work_type_profiles"] = None if checked is None else checked[1]
    if "open_loop_work_types" in known:
        fields["open_loop_work_types"] = report.identifier_list(
            known["open_loop_work_types"], place.at("open_loop_work_types"), "work type"
        )
    if "gates" in known:
        fields["gates"] = _gates(known["gates"], place.at("gates"), report)
    if "establishment" in known:
        fields["establishment"] = _establishment(
            known["establishment"], place.at("establishment"), report
        )
    if "bundle_order" in known:
        fields["bundle_order"] = report.choice(
            known["bundle_order"], place.at("bundle_order"), ORDER_RULES
        )
    if "admission" in known:
        fields["admission"] = _admission(known["admission"], place.at("admission"), report)
    if "approval" in known:
        # governance reads it (approval_policy); the engine's frame does not carry it
        _approval(known["approval"], place.at("approval"), report)
    if "memory" in known:
        # the memory write services read it (memory_admission); the engine's frame does not carry it
        _memory(known["memory"], place.at("memory"), report)
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
) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[WorkTypeProfile, ...]] | None:
    """(name, classes) pairs and the long-form profiles; each work type is either an ordered class
    list (short form) or {classes, description, cues} (long form, corpus format 1.1)."""
    if not isinstance(value, dict):
        report.add(
            place, f"expected a mapping of work type to ordered class names, got {describe(value)}"
        )
        return None
    pairs = []
    profiles = []
    for name, entry in value.items():
        # keys here are work type names (data), so an "x-" key is a work type, not an extension
        checked_name = report.identifier(name, place.at(name), "work type")
        if isinstance(entry, dict):
            known, _extras = report.mapping(
                entry, place.at(name), required=("classes",), optional=("description", "cues")
            )
            if known is None or "classes" not in known:
                continue
            checked = report.identifier_list(known["classes"], place.at(name, "classes"), "class name")
            description = ""
            if "description" in known:
                description = report.string(known["description"], place.at(name, "description"))
            cues: tuple[str, ...] | None = ()
            if "cues" in known:
                cues = _cues(known["cues"], place.at(name, "cues"), report)
            if checked_name is not None and checked is not None and description is not None and cues is not None:
                pairs.append((checked_name, checked))
                profiles.append(WorkTypeProfile(checked_name, description.strip(), cues))
            continue
        checked = report.identifier_list(entry, place.at(name), "class name")
        if checked_name is not None and checked is not None:
            pairs.append((checked_name, checked))
    # the engine keeps work types sorted by name; each preference list keeps its written order
    return tuple(sorted(pairs)), tuple(sorted(profiles, key=lambda p: p.name))


def listed_classes(entry: Any) -> Any:
    """A work type's ordered class list from a raw frame mapping, whichever form it is written in."""
    return entry.get("classes") if isinstance(entry, dict) else entry


def _cues(value: Any, place: Place, report: Report) -> tuple[str, ...] | None:
    entries = report.items(value, place)
    if entries is None:
        return None
    cues = [report.string(item, at, nonempty=True) for at, item in entries]
    if any(cue is None for cue in cues):
        return None
    return tuple(cue.strip() for cue in cues)  # type: ignore[union-attr]


def _admission(value: Any, place: Place, report: Report) -> AdmissionPolicy | None:
    known, _extras = report.mapping(value, place, optional=ADMISSION_KEYS)
    if known is None:
        return None
    fields: dict[str, Any] = {}
    if "rule" in known:
        fields["rule"] = report.choice(known["rule"], place.at("rule"), ADMISSION_RULES)
    for key in ("floor", "unlisted_floor"):
        if key in known:
            floor = report.number(known[key], place.at(key))
            if floor is not None and not 0.0 <= floor <= 1.0:
                report.add(place.at(key), f"must be between 0 and 1, got {floor}")
                floor = None
            fields[key] = floor
    if "unlisted" in known:
        fields["unlisted"] = report.integer(known["unlisted"], place.at("unlisted"), minimum=0)
    if "tier_cap" in known:
        fields["tier_cap"] = report.integer(known["tier_cap"], place.at("tier_cap"), minimum=1)
    if any(item is None for item in fields.values()):
        return None
    return AdmissionPolicy(**fields)


def _establishment(value: Any, place: Place, report: Report) -> EstablishmentPolicy | None:
    known, _extras = report.mapping(value, place, optional=ESTABLISHMENT_KEYS)
    if known is None:
        return None
    fields: dict[str, Any] = {}
    if "builder" in known:
        fields["builder"] = report.choice(known["builder"], place.at("builder"), tuple(BUILDERS))
    if "ambiguous" in known:
        fields["ambiguous"] = report.choice(
            known["ambiguous"], place.at("ambiguous"), AMBIGUOUS_BEHAVIOURS
        )
    if "unknown" in known:
        fields["unknown"] = report.choice(known["unknown"], place.at("unknown"), UNKNOWN_BEHAVIOURS)
    if "thresholds" in known:
        fields["thresholds"] = _thresholds(known["thresholds"], place.at("thresholds"), report)
    if "calibration" in known:
        fields["calibration"] = report.choice(
            known["calibration"], place.at("calibration"), CALIBRATIONS
        )
    if "min_calibrated" in known:
        count = report.number(known["min_calibrated"], place.at("min_calibrated"))
        if count is not None and (count != int(count) or count < 0):
            report.add(place.at("min_calibrated"), f"expected a whole number >= 0, got {count!r}")
            count = None
        fields["min_calibrated"] = None if count is None else int(count)
    if "query_head" in known:
        share = report.number(known["query_head"], place.at("query_head"))
        if share is not None and not 0 <= share <= 1:
            report.add(place.at("query_head"), f"expected a share of the budget in [0, 1], got {share!r}")
            share = None
        fields["query_head"] = None if share is None else float(share)
    if any(item is None for item in fields.values()):
        return None
    return EstablishmentPolicy(**fields)


def _thresholds(value: Any, place: Place, report: Report) -> tuple[BuilderThresholds, ...] | None:
    """Per builder {margin, min_score}; a builder not named keeps its default thresholds."""
    if not isinstance(value, dict):
        report.add(place, f"expected a mapping of frame builder to thresholds, got {describe(value)}")
        return None
    chosen = {item.builder: item for item in DEFAULT_THRESHOLDS}
    failed = False
    for name, entry in value.items():
        builder = report.choice(name, place.at(name), tuple(BUILDERS))
        known, _extras = report.mapping(entry, place.at(name), optional=THRESHOLD_KEYS)
        if builder is None or known is None:
            failed = True
            continue
        bounds = {key: report.number(known[key], place.at(name, key)) for key in known}
        if None in bounds.values():
            failed = True
            continue
        base = chosen.get(builder, BuilderThresholds(builder, margin=0.0, min_score=0.0))
        chosen[builder] = BuilderThresholds(
            builder,
            margin=bounds.get("margin", base.margin),
            min_score=bounds.get("min_score", base.min_score),
        )
    return None if failed else tuple(chosen[name] for name in sorted(chosen))


def _gates(value: Any, place: Place, report: Report) -> Gates | None:
    known, _extras = report.mapping(value, place, optional=GATES_KEYS + GATE_STANDARD_KEYS)
    if known is None:
        return None
    standards_ok = check_gate_standards(known, place, report)  # governance reads them, not the engine
    fields: dict[str, Any] = {}
    if "primary" in known:
        fields["primary"] = report.choice(known["primary"], place.at("primary"), METRICS)
    if "min_improvement" in known:
        fields["min_improvement"] = report.number(
            known["min_improvement"], place.at("min_improvement")
        )
    if "require_interval" in known:
        fields["require_interval"] = report.boolean(known["require_interval"], place.at("require_interval"))
    if "limits" in known:
        entries = report.items(known["limits"], place.at("limits"))
        limits = [_limit(item, at, report) for at, item in entries or ()]
        fields["limits"] = tuple(limits) if entries is not None and None not in limits else None
    if not standards_ok or any(item is None for item in fields.values()):
        return None
    return Gates(**fields)


def _approval(value: Any, place: Place, report: Report) -> ApprovalPolicy | None:
    known, _extras = report.mapping(value, place, optional=APPROVAL_KEYS)
    if known is None:
        return None
    fields: dict[str, Any] = {}
    if "required_approvals" in known:
        count = report.integer(
            known["required_approvals"], place.at("required_approvals"), minimum=1
        )
        if count is not None and count > MAX_REQUIRED_APPROVALS:
            report.add(
                place.at("required_approvals"),
                f"must be at most {MAX_REQUIRED_APPROVALS}, got {count}",
            )
            count = None
        fields["required_approvals"] = count
    for key in ("rejection_blocks", "approver_may_promote"):
        if key in known:
            fields[key] = report.boolean(known[key], place.at(key))
    if any(item is None for item in fields.values()):
        return None
    return ApprovalPolicy(**fields)


def _memory(value: Any, place: Place, report: Report) -> str | None:
    known, _extras = report.mapping(value, place, optional=MEMORY_KEYS)
    if known is None:
        return None
    if "admission" not in known:
        return DEFAULT_MEMORY_ADMISSION
    return report.choice(known["admission"], place.at("admission"), MEMORY_ADMISSIONS)


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
