"""read_corpus: a corpus directory in the interchange format, fully checked, or a CorpusError."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from selection.corpus.contents import CorpusData, ProjectSpec, ProposalSpec, TaskSpec, UnitRecord
from selection.corpus.evaluation_tasks import check_proposals, check_tasks
from selection.corpus.frames import check_frame
from selection.corpus.issues import CorpusError
from selection.corpus.places import Place, Report, Unreadable
from selection.corpus.sources import load_jsonl, load_yaml
from selection.corpus.units import check_units

CORPUS_FILE = "corpus.yaml"
UNITS_FILE = "units.jsonl"
TASKS_FILE = "tasks.yaml"
PROPOSALS_FILE = "proposals.yaml"
CORPUS_KEYS = ("name", "projects")
CORPUS_OPTIONAL = ("description", "standpoint")
PROJECT_KEYS = ("slug", "frame")
PROJECT_OPTIONAL = ("name",)


def read_corpus(path: str | Path) -> CorpusData:
    """Read and check every file of the corpus at `path`; raises CorpusError listing every issue."""
    directory = Path(path)
    report = Report()
    if not directory.is_dir():
        report.add_file(str(directory), "", "is not a corpus directory")
        raise CorpusError(report.issues)
    units_present = (directory / UNITS_FILE).is_file()
    for required in (CORPUS_FILE, UNITS_FILE):
        if not (directory / required).is_file():
            report.add_file(
                required, "", f"is missing: a corpus directory needs {CORPUS_FILE} and {UNITS_FILE}"
            )

    header = _read_header(directory, report)
    declared = header["declared"]

    records: list[UnitRecord] = []
    unit_ids: Collection[str] = Unreadable()
    lines = load_jsonl(directory / UNITS_FILE, UNITS_FILE, report) if units_present else None
    if lines is not None:
        named = {
            line.value["id"] for line in lines.objects if isinstance(line.value.get("id"), str)
        }
        unit_ids = named | lines.unreadable_ids
        records = check_units(lines.objects, report, declared, unreadable_ids=lines.unreadable_ids)
    units = {record.unit.id: record.unit for record in records}

    tasks: list[TaskSpec] = []
    tasks_extras: dict[str, Any] = {}
    if (directory / TASKS_FILE).exists():
        doc = load_yaml(directory / TASKS_FILE, TASKS_FILE, report)
        if doc is not None:
            tasks, tasks_extras = check_tasks(
                doc, report, declared=declared, unit_ids=unit_ids, units=units
            )

    proposals: list[ProposalSpec] = []
    proposals_extras: dict[str, Any] = {}
    if (directory / PROPOSALS_FILE).exists():
        doc = load_yaml(directory / PROPOSALS_FILE, PROPOSALS_FILE, report)
        if doc is not None:
            projects = {spec.slug: spec for spec in header["projects"]}
            proposals, proposals_extras = check_proposals(
                doc, report, projects=projects, declared=declared
            )

    if report.issues:
        raise CorpusError(report.issues)
    return CorpusData(
        name=header["name"],
        description=header["description"],
        standpoint=header["standpoint"],
        projects=tuple(header["projects"]),
        units=tuple(records),
        tasks=tuple(tasks),
        proposals=tuple(proposals),
        extras=header["extras"],
        tasks_extras=tasks_extras,
        proposals_extras=proposals_extras,
    )


def _read_header(directory: Path, report: Report) -> dict[str, Any]:
    header: dict[str, Any] = {
        "name": None,
        "description": "",
        "standpoint": None,
        "projects": [],
        # until corpus.yaml's project list is read, no reference to a project is reported
        "declared": Unreadable(),
        "extras": {},
    }
    if not (directory / CORPUS_FILE).is_file():
        return header
    doc = load_yaml(directory / CORPUS_FILE, CORPUS_FILE, report)
    if doc is None:
        return header
    root = Place(CORPUS_FILE, (), doc.lines)
    known, header["extras"] = report.mapping(
        doc.value, root, required=CORPUS_KEYS, optional=CORPUS_OPTIONAL
    )
    if known is None:
        return header
    if "name" in known:
        header["name"] = report.identifier(known["name"], root.at("name"), "corpus name")
    if "description" in known:
        header["description"] = report.string(known["description"], root.at("description"))
    if "standpoint" in known:
        header["standpoint"] = report.time(known["standpoint"], root.at("standpoint"))
    entries = (
        report.items(known.get("projects"), root.at("projects")) if "projects" in known else None
    )
    if entries is not None and not entries:
        report.add(root.at("projects"), "a corpus declares at least one project")
    if entries is not None:
        header["declared"] = set()
    # declare every slug first: a frame's scope may name a project declared after it
    slugs: list[str | None] = []
    for place, value in entries or ():
        slug = value.get("slug") if isinstance(value, dict) else None
        if isinstance(slug, str) and slug in header["declared"]:
            report.add(place.at("slug"), f'project "{slug}" is declared twice')
            slug = None
        elif isinstance(slug, str):
            header["declared"].add(slug)
        slugs.append(slug)
    for (place, value), slug in zip(entries or (), slugs, strict=True):
        spec = _project(value, place, report, header["declared"], duplicate=slug is None)
        if spec is not None:
            header["projects"].append(spec)
    return header


def _project(
    value: Any, place: Place, report: Report, declared: set[str], *, duplicate: bool
) -> ProjectSpec | None:
    known, extras = report.mapping(value, place, required=PROJECT_KEYS, optional=PROJECT_OPTIONAL)
    if known is None or "slug" not in known:
        return None
    slug = report.identifier(known["slug"], place.at("slug"), "project slug")
    name = (
        report.string(known["name"], place.at("name"), nonempty=True) if "name" in known else slug
    )
    if "frame" not in known or slug is None:
        return None
    frame = check_frame(known["frame"], place.at("frame"), report, project=slug, declared=declared)
    if frame is None or name is None or duplicate:
        return None
    return ProjectSpec(
        slug=slug,
        name=name,
        frame=known["frame"],
        project_frame=frame,
        extras=extras,
        line=place.yaml_line,
    )
