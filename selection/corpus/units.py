"""units.jsonl objects checked into engine Units, then their links checked across the corpus."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from selection.corpus.contents import UnitRecord
from selection.corpus.places import Place, Report
from selection.corpus.sources import JsonLine
from selection.engine.types import OpenLoop, Unit

FILE = "units.jsonl"
REQUIRED = ("id", "project", "class", "text")
OPTIONAL = (
    "title",
    "created_at",
    "valid_from",
    "valid_to",
    "supersedes",
    "echo_of",
    "supports",
    "refutes",
    "open_loop",
    "paths",
    "subject",
    "facet",
    "root",
)
LIST_LINKS = ("supersedes", "supports", "refutes")
OPEN_LOOP_STATUSES = ("open", "closed")
OPEN_LOOP_KINDS = ("todo", "question", "expectation")
_NEVER_CARRIED = ("importance", "priority", "weight")


def _unknown_hint(key: str) -> str | None:
    if key.lower() in _NEVER_CARRIED:
        return (
            "a unit never carries an importance, priority or weight; what matters is decided "
            "by the "
            "frames at selection time"
        )
    return None


@dataclass
class _Parsed:
    place: Place
    fields: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    open_loop_extras: dict[str, Any] = field(default_factory=dict)
    complete: bool = True


def check_units(
    lines: list[JsonLine],
    report: Report,
    declared: Collection[str],
    *,
    unreadable_ids: Collection[str] = (),
) -> list[UnitRecord]:
    parsed = [_parse(line, report, declared) for line in lines]
    first_line: dict[str, int] = {}
    for unit in parsed:
        unit_id = unit.fields.get("id")
        if unit_id is None:
            continue
        if unit_id in first_line:
            report.add(
                unit.place.at("id"),
                f'duplicate id "{unit_id}": already used on line {first_line[unit_id]}',
            )
            unit.complete = False
        else:
            first_line[unit_id] = unit.place.line or 0
    # a link to an id that is present but ill-formed or unreadable is that unit's issue
    named = {line.value["id"] for line in lines if isinstance(line.value.get("id"), str)}
    linkable = named | set(unreadable_ids)
    for unit in parsed:
        _check_links(unit, linkable, report)
    by_id = {unit.fields["id"]: unit for unit in parsed if unit.fields.get("id") in first_line}
    _check_supersedes_cycles(parsed, by_id, report)
    _check_echo_cycles(parsed, by_id, report)
    return [
        UnitRecord(
            unit=Unit(**unit.fields),
            extras=unit.extras,
            line=unit.place.line or 0,
            open_loop_extras=unit.open_loop_extras,
        )
        for unit in parsed
        if unit.complete
    ]


def _parse(line: JsonLine, report: Report, declared: Collection[str]) -> _Parsed:
    place = Place(FILE, line=line.line)
    unit = _Parsed(place)
    before = len(report)
    for key in line.duplicate_keys:
        report.add(place.at(key), f'key "{key}" appears more than once in this object')
    known, unit.extras = report.mapping(
        line.value, place, required=REQUIRED, optional=OPTIONAL, unknown_hint=_unknown_hint
    )
    known = known or {}
    fields = unit.fields
    if "id" in known:
        fields["id"] = report.identifier(known["id"], place.at("id"), "unit id")
    if "project" in known:
        fields["project"] = report.project(known["project"], place.at("project"), declared)
    if "class" in known:
        fields["evidence_class"] = report.identifier(
            known["class"], place.at("class"), "class name"
        )
    if "text" in known:
        fields["text"] = report.string(known["text"], place.at("text"), nonempty=True)
    if "title" in known:
        fields["title"] = report.string(known["title"], place.at("title"))
    # subject and facet are a structural identity: an empty one would identify nothing
    for key in ("subject", "facet"):
        if key in known:
            fields[key] = report.string(known[key], place.at(key), nonempty=True)
    if "created_at" in known:
        fields["created_at"] = report.time(known["created_at"], place.at("created_at"))
    for key in ("valid_from", "valid_to"):
        if key in known and known[key] is not None:
            fields[key] = report.time(known[key], place.at(key))
    for key in LIST_LINKS:
        if key in known:
            fields[key] = report.identifier_list(known[key], place.at(key), "unit id")
    if "echo_of" in known:
        fields["echo_of"] = report.identifier(known["echo_of"], place.at("echo_of"), "unit id")
    if "open_loop" in known:
        fields["open_loop"] = _open_loop(known["open_loop"], place.at("open_loop"), report, unit)
    if "paths" in known:
        fields["paths"] = report.string_list(known["paths"], place.at("paths"))
    if "root" in known:
        fields["root"] = report.boolean(known["root"], place.at("root"))
    valid_from, valid_to = fields.get("valid_from"), fields.get("valid_to")
    if (
        isinstance(valid_from, datetime)
        and isinstance(valid_to, datetime)
        and valid_to < valid_from
    ):
        report.add(
            place.at("valid_to"),
            f"validity ends ({known['valid_to']}) before it starts ({known['valid_from']})",
        )
    unit.complete = len(report) == before
    return unit


def _open_loop(value: Any, place: Place, report: Report, unit: _Parsed) -> OpenLoop | None:
    known, unit.open_loop_extras = report.mapping(value, place, required=("status", "kind"))
    if known is None or "status" not in known or "kind" not in known:
        return None
    status = report.choice(known["status"], place.at("status"), OPEN_LOOP_STATUSES)
    kind = report.choice(known["kind"], place.at("kind"), OPEN_LOOP_KINDS)
    if status is None or kind is None:
        return None
    return OpenLoop(status=status, kind=kind)


def _check_links(unit: _Parsed, known_ids: Collection[str], report: Report) -> None:
    own_id = unit.fields.get("id")
    for key in LIST_LINKS:
        seen: set[str] = set()
        for index, target in enumerate(unit.fields.get(key) or ()):
            if target not in known_ids:
                report.add(unit.place.at(key, index), f'unit "{target}" does not exist')
            elif target in seen:
                report.add(unit.place.at(key, index), f'unit "{target}" is listed twice')
            elif target == own_id and key != "supersedes":  # supersedes: reported as a cycle
                report.add(unit.place.at(key, index), f"a unit cannot {key[:-1]} itself")
            else:
                seen.add(target)
                continue
            unit.complete = False
    target = unit.fields.get("echo_of")
    if target is not None and target not in known_ids:
        report.add(unit.place.at("echo_of"), f'unit "{target}" does not exist')
        unit.complete = False


def _check_supersedes_cycles(
    parsed: list[_Parsed], by_id: dict[str, _Parsed], report: Report
) -> None:
    done: set[str] = set()
    reported: set[frozenset[str]] = set()
    for unit in parsed:
        start = unit.fields.get("id")
        if start is None or start in done or start not in by_id:
            continue
        # iterative depth-first search; a link back into the current path closes a cycle
        path: list[str] = [start]
        on_path = {start}
        stack = [iter(by_id[start].fields.get("supersedes") or ())]
        while stack:
            target = next(stack[-1], None)
            if target is None:
                stack.pop()
                finished = path.pop()
                done.add(finished)
                on_path.discard(finished)
                continue
            if target not in by_id or target in done:
                continue
            if target in on_path:
                cycle = path[path.index(target) :] + [target]
                members = frozenset(cycle)
                if members not in reported:
                    reported.add(members)
                    _report_cycle(by_id[cycle[0]], "supersedes", cycle, report)
                continue
            path.append(target)
            on_path.add(target)
            stack.append(iter(by_id[target].fields.get("supersedes") or ()))


def _check_echo_cycles(parsed: list[_Parsed], by_id: dict[str, _Parsed], report: Report) -> None:
    reported: set[frozenset[str]] = set()
    for unit in parsed:
        start = unit.fields.get("id")
        if start is None or start not in by_id:
            continue
        chain = [start]
        current = by_id[start].fields.get("echo_of")
        while current is not None and current in by_id and current not in chain:
            chain.append(current)
            current = by_id[current].fields.get("echo_of")
        if current is not None and current in chain:
            cycle = chain[chain.index(current) :] + [current]
            members = frozenset(cycle)
            if members not in reported:
                reported.add(members)
                _report_cycle(by_id[cycle[0]], "echo_of", cycle, report)


def _report_cycle(unit: _Parsed, key: str, cycle: list[str], report: Report) -> None:
    report.add(unit.place.at(key), f"{key} links form a cycle: {' -> '.join(cycle)}")
    unit.complete = False
