"""What a read corpus holds: frozen records around the engine's own dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from selection.engine.types import ProjectFrame, Unit, WorkFrame, WorkSignal

# Records keep a corpus's "x-" keys in plain dicts (file order), so they compare by value but are
# not hashable; nothing hashes a corpus.


@dataclass(frozen=True)
class ProjectSpec:
    slug: str
    name: str
    # the frame mapping as written and validated: key order and "x-" keys kept, defaults not filled
    frame: dict[str, Any]
    # the same frame as the engine reads it, promoted as version 1
    project_frame: ProjectFrame
    extras: dict[str, Any] = field(default_factory=dict)
    line: int = field(default=0, compare=False)  # where corpus.yaml declares it


@dataclass(frozen=True)
class UnitRecord:
    unit: Unit
    extras: dict[str, Any] = field(default_factory=dict)  # the unit's "x-" keys, in file order
    # 1-based line in units.jsonl; where the unit came from, not what it is
    line: int = field(default=0, compare=False)
    open_loop_extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SignalSpec:
    id: str
    kind: str
    content: str
    extras: dict[str, Any] = field(default_factory=dict)

    def work_signal(self) -> WorkSignal:
        return WorkSignal(id=self.id, kind=self.kind, content=self.content)


@dataclass(frozen=True)
class TaskFrameSpec:
    """A task's declared WorkFrame as written; cites keep file order (field -> signal ids)."""

    objective: str = ""
    work_type: str | None = None
    constraints: tuple[str, ...] = ()
    cites: tuple[tuple[str, tuple[str, ...]], ...] = ()
    extras: dict[str, Any] = field(default_factory=dict)
    cites_extras: dict[str, Any] = field(default_factory=dict)


    def document(self) -> dict[str, Any]:
        """The frame as tasks.yaml writes it (and Task.frame stores it): empty fields left out."""
        written: dict[str, Any] = {}
        if self.objective:
            written["objective"] = self.objective
        if self.work_type is not None:
            written["work_type"] = self.work_type
        if self.constraints:
            written["constraints"] = list(self.constraints)
        if self.cites or self.cites_extras:
            written["cites"] = {name: list(ids) for name, ids in self.cites} | self.cites_extras
        written.update(self.extras)
        return written

@dataclass(frozen=True)
class TaskSpec:
    id: str
    project: str
    query: str
    budget_tokens: int
    family: str = ""
    pair: str | None = None
    standpoint: datetime | None = None
    signals: tuple[SignalSpec, ...] = ()
    frame: TaskFrameSpec | None = None
    misassigned_work_type: str | None = None
    # the `routing:` block as written (corpus format 1.1): task_category, paths, overlays
    routing: dict[str, Any] | None = None
    # hidden labels (unit id -> MUST/SHOULD/OPTIONAL/DISTRACTOR/HARMFUL); read only to score
    ledger: dict[str, str] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    line: int = field(default=0, compare=False)

    def work_frame(self, default_standpoint: datetime | None = None) -> WorkFrame:
        """The declared WorkFrame as the engine reads it (cites sorted by field name)."""
        spec = self.frame or TaskFrameSpec()
        return WorkFrame(
            objective=spec.objective,
            work_type=spec.work_type,
            constraints=spec.constraints,
            signals=tuple(signal.work_signal() for signal in self.signals),
            standpoint=self.standpoint or default_standpoint,
            establishment="declared",
            cites=tuple(sorted(spec.cites)),
        )

    def label(self, unit_id: str) -> str:
        """Units not named in a ledger count as DISTRACTOR."""
        return self.ledger.get(unit_id, "DISTRACTOR")


@dataclass(frozen=True)
class ProposalSpec:
    id: str
    project: str
    patch: dict[str, Any]  # JSON Merge Patch (RFC 7386) over the project's current frame
    title: str = ""
    rationale: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class CorpusData:
    name: str
    projects: tuple[ProjectSpec, ...]
    units: tuple[UnitRecord, ...]
    description: str = ""
    standpoint: datetime | None = None
    tasks: tuple[TaskSpec, ...] = ()
    proposals: tuple[ProposalSpec, ...] = ()
    extras: dict[str, Any] = field(default_factory=dict)  # corpus.yaml's top-level "x-" keys
    tasks_extras: dict[str, Any] = field(default_factory=dict)  # tasks.yaml's
    proposals_extras: dict[str, Any] = field(default_factory=dict)  # proposals.yaml's

    def project(self, slug: str) -> ProjectSpec:
        for spec in self.projects:
            if spec.slug == slug:
                return spec
        raise KeyError(slug)

    def units_by_id(self) -> dict[str, Unit]:
        return {record.unit.id: record.unit for record in self.units}
