"""One validator for import and writes: a written unit is checked by the corpus reader's own checks.

A write is the units.jsonl object it would add (or the object a unit would become), so it meets the
same checks an import does: selection.corpus.limits (line size, depth, NUL and lone surrogates),
selection.corpus.units.check_units (required keys, identifiers, times, links, cycles) and the
importer's column limits (importing._too_long). Two checks only a write needs come on top: the
class must be one the project knows (its frame names it or one of its units carries it), and the
id must be free in the corpus. The first issue found is raised as WriteRefused naming its field;
nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from authority.errors import GovernanceError, InputRefused
from selection.corpus import CorpusData, UnitRecord
from selection.corpus import limits as corpus_limits
from selection.corpus.frames import listed_classes
from selection.corpus.places import IDENTIFIER, Report
from selection.corpus.sources import JsonLine
from selection.corpus.units import LIST_LINKS, check_units
from selection.memory.importing import _too_long  # the import's column limits, one definition
from selection.models import MemoryUnit, Project, UnitStatus

MAX_KEY = 200  # an Idempotency-Key, as stored


class WriteRefused(InputRefused):
    """A memory write refused for what was sent; `field` names where. Nothing changed."""


class WriteConflict(GovernanceError):
    """A memory write refused by what memory holds (a structural conflict, a unit in another
    state, an idempotency key sent again with another request): HTTP 409. Nothing changed."""

    status = 409


def _field(path: Iterable[str | int]) -> tuple[str, ...]:
    return tuple(str(part) for part in path)


def _refused_issue(issue) -> WriteRefused:
    field = tuple(part for part in issue.field.split(".") if part) if issue.field else ()
    where = f"{issue.field}: " if issue.field else ""
    return WriteRefused(f"{where}{issue.message}", field=field)


def link_targets(record: dict[str, Any]) -> set[str]:
    """The unit ids a units.jsonl object links to (well-formed or not: the checks say which)."""
    targets: set[str] = set()
    for key in LIST_LINKS:
        value = record.get(key)
        if isinstance(value, list):
            targets |= {item for item in value if isinstance(item, str)}
    if isinstance(record.get("echo_of"), str):
        targets.add(record["echo_of"])
    return targets


def known_classes(project: Project, snapshot: dict | None) -> set[str]:
    """The classes a project knows: named by its frame (default_classes, work types) or carried by
    one of its units. A class outside them is most often a typo, and would select nothing."""
    frame = snapshot or {}
    named = set(frame.get("default_classes") or ())
    for entry in (frame.get("work_types") or {}).values():
        named |= set(listed_classes(entry) or ())
    carried = set(
        MemoryUnit.objects.filter(project=project, status=UnitStatus.ACTIVE)
        .values_list("evidence_class", flat=True)
        .distinct()
    )
    return {name for name in named | carried if isinstance(name, str)}


def _limits(record: dict[str, Any]) -> None:
    """The reader's limits on one units.jsonl line, before anything parses it."""
    for path, problem in corpus_limits.value_problems(record):
        raise WriteRefused(f"{'.'.join(map(str, path)) or 'body'}: {problem}", field=_field(path))
    if corpus_limits.depth(record) > corpus_limits.MAX_DEPTH:
        raise WriteRefused(f"the unit nests deeper than {corpus_limits.MAX_DEPTH} levels", field=())
    size = len(json.dumps(record, ensure_ascii=False, default=str).encode("utf-8"))
    if size > corpus_limits.MAX_LINE_BYTES:
        raise WriteRefused(
            f"text: the unit is {size} bytes as a units.jsonl line; at most {corpus_limits.MAX_LINE_BYTES}",
            field=("text",),
        )


def unit_checked(
    record: dict[str, Any],
    *,
    project: Project,
    snapshot: dict | None,
    new: bool,
    linkable: Iterable[str] | None = None,
    chain: Iterable[dict[str, Any]] = (),
) -> UnitRecord:
    """`record` (a units.jsonl object of `project`) checked as the corpus reader checks a line, or
    WriteRefused naming the first field at fault.

    `new`: the unit is created, so its id must be free in the corpus. `linkable`: the ids its links
    may name (default: the active units of the corpus among its targets). `chain`: other units'
    objects checked with it, so a cycle through them is found (an echo link added to a unit).
    """
    if not isinstance(record, dict):
        raise WriteRefused("a unit is a JSON object", field=())
    _limits(record)
    corpus_id = project.corpus_id
    uid = record.get("id")
    if new and isinstance(uid, str) and IDENTIFIER.fullmatch(uid):
        if MemoryUnit.objects.filter(corpus_id=corpus_id, uid=uid).exists():
            raise WriteRefused(f'id: unit "{uid}" already exists in this corpus', field=("id",))
    if linkable is None:
        targets = link_targets(record)
        linkable = set(
            MemoryUnit.objects.filter(corpus_id=corpus_id, uid__in=targets, status=UnitStatus.ACTIVE).values_list(
                "uid", flat=True
            )
        )
    declared = set(Project.objects.filter(corpus_id=corpus_id).values_list("slug", flat=True))
    lines = [JsonLine(1, record, ())] + [JsonLine(2 + i, doc, ()) for i, doc in enumerate(chain)]
    report = Report()
    records = check_units(lines, report, declared, unreadable_ids=set(linkable))
    if report.issues:
        raise _refused_issue(report.issues[0])
    checked = records[0]
    if checked.unit.project != project.slug:
        raise WriteRefused(f"project: a unit written in {project.slug} belongs to it", field=("project",))
    data = CorpusData(
        name="",
        description="",
        standpoint=None,
        projects=(),
        units=(checked,),
        tasks=(),
        proposals=(),
        extras={},
        tasks_extras={},
        proposals_extras={},
    )
    for issue in _too_long(data):
        raise _refused_issue(issue)
    if checked.unit.evidence_class not in known_classes(project, snapshot):
        raise WriteRefused(
            f'class: "{checked.unit.evidence_class}" is no class of {project.slug} (its frame names none such '
            "and no unit carries it)",
            field=("class",),
        )
    return checked


def idempotency_key_checked(key: str | None) -> str | None:
    """The key as stored, or None for a write without one; WriteRefused when it cannot be a key."""
    if key is None:
        return None
    if not isinstance(key, str) or not key.strip():
        raise WriteRefused("Idempotency-Key: an empty key identifies no request", field=("idempotency_key",))
    key = key.strip()
    if len(key) > MAX_KEY or corpus_limits.string_problem(key) or not key.isprintable():
        raise WriteRefused(f"Idempotency-Key: at most {MAX_KEY} printable characters", field=("idempotency_key",))
    return key
