"""write_corpus: CorpusData back into the interchange format; read(write(read(X))) == read(X)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from selection.corpus.contents import CorpusData, ProposalSpec, TaskSpec, UnitRecord
from selection.corpus.reader import CORPUS_FILE, PROPOSALS_FILE, TASKS_FILE, UNITS_FILE
from selection.corpus.sources import CorpusDumper

_CORPUS_FILES = (CORPUS_FILE, UNITS_FILE, TASKS_FILE, PROPOSALS_FILE)


def format_time(value: datetime) -> str:
    """ISO 8601 keeping the written offset; UTC is written with "Z" as on the format page."""
    text = value.isoformat()
    if value.utcoffset() == timedelta(0):
        text = text.removesuffix("+00:00") + "Z"
    return text


def write_corpus(data: CorpusData, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write the corpus files into `path`, which must be empty unless `overwrite` replaces them."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    present = [name for name in _CORPUS_FILES if (directory / name).exists()]
    if present and not overwrite:
        raise FileExistsError(
            f"{directory} already holds {', '.join(present)}; pass overwrite=True to replace them"
        )
    _write_yaml(directory / CORPUS_FILE, corpus_document(data))
    lines = [json.dumps(unit_object(record), ensure_ascii=False) for record in data.units]
    (directory / UNITS_FILE).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    # an optional file with nothing to say is left out, and a stale one from earlier removed
    for name, items, document in (
        (
            TASKS_FILE,
            data.tasks or data.tasks_extras,
            lambda: {"tasks": [task_object(task) for task in data.tasks], **data.tasks_extras},
        ),
        (
            PROPOSALS_FILE,
            data.proposals or data.proposals_extras,
            lambda: {
                "proposals": [proposal_object(p) for p in data.proposals],
                **data.proposals_extras,
            },
        ),
    ):
        if items:
            _write_yaml(directory / name, document())
        elif (directory / name).exists():
            (directory / name).unlink()
    return directory


def _write_yaml(path: Path, document: dict[str, Any]) -> None:
    text = yaml.dump(
        document,
        Dumper=CorpusDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
    path.write_text(text, encoding="utf-8")


def corpus_document(data: CorpusData) -> dict[str, Any]:
    document: dict[str, Any] = {"name": data.name}
    if data.description:
        document["description"] = data.description
    if data.standpoint is not None:
        document["standpoint"] = format_time(data.standpoint)
    document["projects"] = [
        {"slug": spec.slug, "name": spec.name, "frame": spec.frame, **spec.extras}
        for spec in data.projects
    ]
    document.update(data.extras)
    return document


def unit_object(record: UnitRecord) -> dict[str, Any]:
    """One units.jsonl object: keys in the format page's order, absent optional keys left out."""
    unit = record.unit
    obj: dict[str, Any] = {"id": unit.id, "project": unit.project, "class": unit.evidence_class}
    if unit.title:
        obj["title"] = unit.title
    obj["text"] = unit.text
    for key in ("created_at", "valid_from", "valid_to"):
        value = getattr(unit, key)
        if value is not None:
            obj[key] = format_time(value)
    if unit.supersedes:
        obj["supersedes"] = list(unit.supersedes)
    if unit.echo_of is not None:
        obj["echo_of"] = unit.echo_of
    for key in ("supports", "refutes"):
        if getattr(unit, key):
            obj[key] = list(getattr(unit, key))
    if unit.open_loop is not None:
        obj["open_loop"] = {
            "status": unit.open_loop.status,
            "kind": unit.open_loop.kind,
            **record.open_loop_extras,
        }
    if unit.paths:
        obj["paths"] = list(unit.paths)
    for key in ("subject", "facet"):
        if getattr(unit, key) is not None:
            obj[key] = getattr(unit, key)
    if unit.root:
        obj["root"] = True
    obj.update(record.extras)
    return obj


def task_object(task: TaskSpec) -> dict[str, Any]:
    obj: dict[str, Any] = {"id": task.id}
    if task.family:
        obj["family"] = task.family
    obj["project"] = task.project
    if task.pair is not None:
        obj["pair"] = task.pair
    obj["query"] = task.query
    if task.standpoint is not None:
        obj["standpoint"] = format_time(task.standpoint)
    obj["budget_tokens"] = task.budget_tokens
    if task.signals:
        obj["signals"] = [
            {"id": signal.id, "kind": signal.kind, "content": signal.content, **signal.extras}
            for signal in task.signals
        ]
    if task.frame is not None:
        obj["frame"] = task.frame.document()
    if task.misassigned_work_type is not None:
        obj["misassigned_work_type"] = task.misassigned_work_type
    if task.routing is not None:
        obj["routing"] = dict(task.routing)
    if task.ledger:
        obj["ledger"] = dict(task.ledger)
    obj.update(task.extras)
    return obj


def proposal_object(proposal: ProposalSpec) -> dict[str, Any]:
    obj: dict[str, Any] = {"id": proposal.id, "project": proposal.project}
    if proposal.title:
        obj["title"] = proposal.title
    if proposal.rationale:
        obj["rationale"] = proposal.rationale
    obj["patch"] = proposal.patch
    obj.update(proposal.extras)
    return obj
