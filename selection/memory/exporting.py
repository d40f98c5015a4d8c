"""Corpus export: a loaded corpus written back in the interchange format, then read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from authority.models import FrameVersion
from authority.selectors import current_frame_version
from selection.corpus import (
    CorpusData,
    CorpusError,
    CorpusIssue,
    ProjectSpec,
    SignalSpec,
    TaskFrameSpec,
    TaskSpec,
    UnitRecord,
    read_corpus,
    write_corpus,
)
from selection.corpus.evaluation_tasks import CITABLE
from selection.corpus.frames import check_frame
from selection.corpus.places import Place, Report
from selection.evaluation.scoring import ledgers_of_corpus
from selection.memory import store
from selection.memory.corpus_parts import corpus_parts
from selection.memory.importing import FILE_EXTRAS, OPEN_LOOP_EXTRAS, PROPOSAL_EXTRAS, SIGNAL_EXTRAS, CorpusRefused
from selection.models import Corpus, Project

__all__ = ["corpus_data", "corpus_export"]


def corpus_export(
    name: str, path: str | Path, *, frames: str = "initial", overwrite: bool = False
) -> Path:
    """Write the loaded corpus `name` into `path` in the interchange format.

    frames="initial" writes each project's imported frame (version 1), so proposals.yaml patches
    apply to it as they did on import; frames="current" writes the promoted frames instead.
    The written corpus is read back before returning: an export that would not import is an error.
    """
    data = corpus_data(name, frames=frames)
    written = write_corpus(data, path, overwrite=overwrite)
    read_corpus(written)
    return written


def corpus_data(name: str, *, frames: str = "initial") -> CorpusData:
    """The loaded corpus `name` as the reader would give it."""
    if frames not in ("initial", "current"):
        raise ValueError(f'frames must be "initial" or "current", not "{frames}"')
    try:
        corpus = Corpus.objects.get(name=name)
    except Corpus.DoesNotExist:
        known = ", ".join(Corpus.objects.order_by("name").values_list("name", flat=True)) or "none"
        raise CorpusRefused(
            [
                CorpusIssue(
                    "corpus", "", "name", f'no corpus named "{name}" is loaded (loaded: {known})'
                )
            ]
        ) from None
    extras = dict(corpus.extras)
    file_extras = extras.pop(FILE_EXTRAS, {})
    proposal_extras = extras.pop(PROPOSAL_EXTRAS, {})
    project_rows = list(corpus.projects.order_by("position", "slug"))
    declared = [row.slug for row in project_rows]
    slugs = {row.pk: row.slug for row in project_rows}
    return CorpusData(
        name=corpus.name,
        description=corpus.description,
        standpoint=corpus.standpoint,
        projects=tuple(_project_spec(row, declared, frames) for row in project_rows),
        units=tuple(_unit_records(corpus, slugs)),
        tasks=tuple(_task_specs(corpus, slugs)),
        proposals=tuple(spec for part in corpus_parts() for spec in part.export(project_rows, proposal_extras)),
        extras=extras,
        tasks_extras=file_extras.get("tasks.yaml", {}),
        proposals_extras=file_extras.get("proposals.yaml", {}),
    )


def _project_spec(row: Project, declared: list[str], frames: str) -> ProjectSpec:
    if frames == "current":
        version = current_frame_version(project=row)
    else:
        version = FrameVersion.objects.filter(project=row, number=1).first()
    if version is None:
        raise CorpusRefused(
            [
                CorpusIssue(
                    "corpus", "", "frame", f'project "{row.slug}" has no frame version to export'
                )
            ]
        )
    report = Report()
    frame = check_frame(
        version.snapshot, Place("frame"), report, project=row.slug, declared=declared
    )
    if frame is None:
        raise CorpusError(report.issues)
    return ProjectSpec(
        slug=row.slug, name=row.name, frame=version.snapshot, project_frame=frame, extras=row.extras
    )


def _unit_records(corpus: Corpus, slugs: dict[int, str]) -> list[UnitRecord]:
    links = store.unit_links(corpus.pk)
    records = []
    rows = corpus.units.order_by("position", "id").values(*store.UNIT_FIELDS, "extras")
    for line, values in enumerate(rows.iterator(chunk_size=2000), start=1):
        extras = dict(values["extras"])
        open_loop_extras = extras.pop(OPEN_LOOP_EXTRAS, {})
        unit = store.unit_from_values(values, slugs[values["project_id"]], links.get(values["id"], {}))
        records.append(
            UnitRecord(unit=unit, extras=extras, line=line, open_loop_extras=open_loop_extras)
        )
    return records


def _task_frame_spec(stored: dict[str, Any]) -> TaskFrameSpec | None:
    if not stored:
        return None
    cites_stored = dict(stored.get("cites") or {})
    cites = tuple((name, tuple(cites_stored.pop(name))) for name in CITABLE if name in cites_stored)
    return TaskFrameSpec(
        objective=stored.get("objective", ""),
        work_type=stored.get("work_type"),
        constraints=tuple(stored.get("constraints") or ()),
        cites=cites,
        extras={key: value for key, value in stored.items() if key.startswith("x-")},
        cites_extras=cites_stored,
    )


def _task_specs(corpus: Corpus, slugs: dict[int, str]) -> list[TaskSpec]:
    specs = []
    rows = corpus.tasks.order_by("position", "id").prefetch_related("signals")
    ledgers = ledgers_of_corpus(corpus.pk)
    for row in rows:
        extras = dict(row.extras)
        signal_extras = extras.pop(SIGNAL_EXTRAS, {})
        signals = tuple(
            SignalSpec(
                id=signal.uid,
                kind=signal.kind,
                content=signal.content,
                extras=signal_extras.get(signal.uid, {}),
            )
            for signal in sorted(row.signals.all(), key=lambda s: (s.position, s.pk))
        )
        specs.append(
            TaskSpec(
                id=row.uid,
                project=slugs[row.project_id],
                query=row.query,
                budget_tokens=row.budget_tokens,
                family=row.family,
                pair=row.pair or None,
                standpoint=row.standpoint,
                signals=signals,
                frame=_task_frame_spec(row.frame),
                misassigned_work_type=row.misassigned_work_type or None,
                routing=row.routing,
                ledger=ledgers.get(row.pk, {}),
                extras=extras,
            )
        )
    return specs
