"""tasks.yaml and proposals.yaml checked against the corpus they belong to."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from selection.corpus.contents import ProjectSpec, ProposalSpec, SignalSpec, TaskFrameSpec, TaskSpec
from selection.corpus.frames import FRAME_KEYS, check_frame, merge_patch
from selection.corpus.places import Place, Report, describe
from selection.corpus.routing import check_task_routing
from selection.corpus.sources import YamlDocument
from selection.engine.types import LEDGER_LABELS, SIGNAL_KINDS, Unit, estimate_tokens

TASK_REQUIRED = ("id", "project", "query", "budget_tokens")
TASK_OPTIONAL = (
    "family",
    "pair",
    "standpoint",
    "signals",
    "frame",
    "misassigned_work_type",
    "routing",
    "ledger",
)
WORK_FRAME_KEYS = ("objective", "work_type", "constraints", "cites")
CITABLE = ("objective", "work_type", "constraints")
PROPOSAL_REQUIRED = ("id", "project", "patch")
PROPOSAL_OPTIONAL = ("title", "rationale")


def check_tasks(
    doc: YamlDocument,
    report: Report,
    *,
    declared: Collection[str],
    unit_ids: Collection[str],
    units: Mapping[str, Unit],
) -> tuple[list[TaskSpec], dict[str, Any]]:
    """`unit_ids`: every id units.jsonl names; `units`: those that passed their own checks."""
    return _entries(
        doc,
        report,
        "tasks",
        "task",
        lambda value, place: _task(value, place, report, declared=declared, unit_ids=unit_ids, units=units),
    )


def _entries(
    doc: YamlDocument, report: Report, key: str, what: str, check: Callable[[Any, Place], Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The document's list under `key`, each entry checked by `check` (None: refused) and its id
    unique in the file; returns the entries that passed and the document's "x-" keys."""
    root = Place(doc.file, (), doc.lines)
    known, extras = report.mapping(doc.value, root, required=(key,))
    if not known or key not in known:
        return [], extras
    entries: list[Any] = []
    first: dict[str, str] = {}
    for place, value in report.items(known[key], root.at(key)) or []:
        entry = check(value, place)
        if entry is None:
            continue
        if entry.id in first:
            report.add(place.at("id"), f'duplicate {what} id "{entry.id}": already used at {first[entry.id]}')
            continue
        first[entry.id] = place.location
        entries.append(entry)
    return entries, extras


def _task(
    value: Any,
    place: Place,
    report: Report,
    *,
    declared: Collection[str],
    unit_ids: Collection[str],
    units: Mapping[str, Unit],
) -> TaskSpec | None:
    known, extras = report.mapping(value, place, required=TASK_REQUIRED, optional=TASK_OPTIONAL)
    if known is None:
        return None
    before = len(report)
    fields: dict[str, Any] = {}
    if "id" in known:
        fields["id"] = report.identifier(known["id"], place.at("id"), "task id")
    if "project" in known:
        fields["project"] = report.project(known["project"], place.at("project"), declared)
    if "query" in known:
        fields["query"] = report.string(known["query"], place.at("query"), nonempty=True)
    if "budget_tokens" in known:
        fields["budget_tokens"] = report.integer(
            known["budget_tokens"], place.at("budget_tokens"), minimum=1
        )
    for key in ("family", "pair"):
        if key in known:
            fields[key] = report.string(known[key], place.at(key), nonempty=True)
    if "standpoint" in known:
        fields["standpoint"] = report.time(known["standpoint"], place.at("standpoint"))
    if "misassigned_work_type" in known:
        fields["misassigned_work_type"] = report.identifier(
            known["misassigned_work_type"], place.at("misassigned_work_type"), "work type"
        )
    if "routing" in known:
        if check_task_routing(known["routing"], place.at("routing"), report) is not None:
            fields["routing"] = dict(known["routing"])
    signals, signal_ids = _signals(known.get("signals", []), place.at("signals"), report)
    fields["signals"] = signals
    if "frame" in known:
        frame = _work_frame(known["frame"], place.at("frame"), report, signal_ids)
        # an empty frame declares nothing: the same task as one without a frame
        fields["frame"] = None if frame == TaskFrameSpec() else frame
    if "ledger" in known:
        ledger = _ledger(known["ledger"], place.at("ledger"), report, unit_ids)
        fields["ledger"] = ledger
        budget = fields.get("budget_tokens")
        if ledger is not None and budget is not None:
            must = [
                unit_id for unit_id, label in ledger.items() if label == "MUST" and unit_id in units
            ]
            needed = sum(estimate_tokens(units[unit_id].text) for unit_id in must)
            if needed > budget:
                report.add(
                    place.at("ledger"),
                    f"its {len(must)} MUST units need {needed} estimated tokens, more than "
                    f"budget_tokens "
                    f"{budget}: the task could never be met",
                )
    if len(report) > before or any(fields.get(key) is None for key in TASK_REQUIRED):
        return None
    return TaskSpec(extras=extras, line=place.yaml_line, **fields)


def _signals(
    value: Any, place: Place, report: Report
) -> tuple[tuple[SignalSpec, ...] | None, set[str]]:
    """The task's signals, and every id it names (valid or not): a cite is judged on its own."""
    entries = report.items(value, place)
    if entries is None:
        return None, set()
    signals: list[SignalSpec] = []
    seen: set[str] = set()
    named = {
        item["id"]
        for _at, item in entries
        if isinstance(item, dict) and isinstance(item.get("id"), str)
    }
    for at, item in entries:
        known, extras = report.mapping(item, at, required=("id", "kind", "content"))
        if known is None or not {"id", "kind", "content"} <= known.keys():
            continue
        signal_id = report.identifier(known["id"], at.at("id"), "signal id")
        kind = report.choice(known["kind"], at.at("kind"), SIGNAL_KINDS)
        content = report.string(known["content"], at.at("content"), nonempty=True)
        if signal_id is not None and signal_id in seen:
            report.add(at.at("id"), f'duplicate signal id "{signal_id}" in this task')
            continue
        if signal_id is None or kind is None or content is None:
            continue
        seen.add(signal_id)
        signals.append(SignalSpec(id=signal_id, kind=kind, content=content, extras=extras))
    return tuple(signals), named


def _work_frame(
    value: Any, place: Place, report: Report, signal_ids: set[str]
) -> TaskFrameSpec | None:
    known, extras = report.mapping(value, place, optional=WORK_FRAME_KEYS)
    if known is None:
        return None
    fields: dict[str, Any] = {}
    if "objective" in known:
        fields["objective"] = report.string(known["objective"], place.at("objective"))
    if "work_type" in known:
        fields["work_type"] = report.identifier(
            known["work_type"], place.at("work_type"), "work type"
        )
    if "constraints" in known:
        fields["constraints"] = report.string_list(known["constraints"], place.at("constraints"))
    cites_extras: dict[str, Any] = {}
    if "cites" in known:
        cites, cites_extras = report.mapping(known["cites"], place.at("cites"), optional=CITABLE)
        pairs = []
        for name, ids in (cites or {}).items():
            # membership is the whole check: a declared signal's id is checked where it is declared
            checked = report.string_list(ids, place.at("cites", name))
            for index, signal_id in enumerate(checked or ()):
                if signal_id not in signal_ids:
                    report.add(
                        place.at("cites", name, index),
                        f'signal "{signal_id}" is not declared in this task\'s signals',
                        field=name,
                    )
            pairs.append((name, checked or ()))
        # the order cites are written in carries no meaning: keep the format page's field order
        pairs.sort(key=lambda pair: CITABLE.index(pair[0]))
        fields["cites"] = tuple(pairs) if cites is not None else None
    if any(item is None for item in fields.values()):
        return None
    return TaskFrameSpec(extras=extras, cites_extras=cites_extras, **fields)


def _ledger(
    value: Any, place: Place, report: Report, unit_ids: Collection[str]
) -> dict[str, str] | None:
    if not isinstance(value, dict):
        report.add(place, "expected a mapping of unit id to label")
        return None
    ledger: dict[str, str] = {}
    for unit_id, label in value.items():
        # keys are unit ids (data): "x-" has no special meaning here
        at = place.at(unit_id)
        if unit_id not in unit_ids:
            report.add(at, f'unit "{unit_id}" does not exist in units.jsonl', field="ledger")
        if label not in LEDGER_LABELS:
            shown = f'"{label}"' if isinstance(label, str) else describe(label)
            report.add(
                at, f"label {shown} is not one of: {', '.join(LEDGER_LABELS)}", field="ledger"
            )
        else:
            ledger[unit_id] = label
    return ledger


def check_proposals(
    doc: YamlDocument,
    report: Report,
    *,
    projects: Mapping[str, ProjectSpec],
    declared: Collection[str],
) -> tuple[list[ProposalSpec], dict[str, Any]]:
    """`projects` holds the projects whose frames passed their checks; `declared` every slug."""
    return _entries(
        doc,
        report,
        "proposals",
        "proposal",
        lambda value, place: _proposal(value, place, report, projects=projects, declared=declared),
    )


def _proposal(
    value: Any,
    place: Place,
    report: Report,
    *,
    projects: Mapping[str, ProjectSpec],
    declared: Collection[str],
) -> ProposalSpec | None:
    known, extras = report.mapping(
        value, place, required=PROPOSAL_REQUIRED, optional=PROPOSAL_OPTIONAL
    )
    if known is None:
        return None
    before = len(report)
    fields: dict[str, Any] = {}
    if "id" in known:
        fields["id"] = report.identifier(known["id"], place.at("id"), "proposal id")
    if "project" in known:
        fields["project"] = report.project(known["project"], place.at("project"), declared)
    for key in PROPOSAL_OPTIONAL:
        if key in known:
            fields[key] = report.string(known[key], place.at(key))
    if "patch" in known:
        patch = known["patch"]
        if not isinstance(patch, dict):
            report.add(
                place.at("patch"),
                "a patch is a JSON Merge Patch: it must be a mapping of frame keys",
            )
        else:
            fields["patch"] = patch
            base = projects.get(fields.get("project") or "")
            if base is not None:
                # the patch must leave a frame the format accepts; checked against the initial frame
                check_frame(
                    merge_patch(base.frame, patch),
                    place.at("patch"),
                    report,
                    project=base.slug,
                    declared=declared,
                )
            else:
                report.mapping(patch, place.at("patch"), optional=FRAME_KEYS)
    if len(report) > before or any(fields.get(key) is None for key in PROPOSAL_REQUIRED):
        return None
    return ProposalSpec(extras=extras, line=place.yaml_line, **fields)
