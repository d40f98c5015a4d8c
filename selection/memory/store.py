"""The only place ORM rows become engine dataclasses (and back); selection code reads no ledger."""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict
from dataclasses import replace

import numpy as np

from authority.selectors import frame_version_by_id
from selection.corpus.frames import check_frame
from selection.corpus.issues import CorpusError
from selection.corpus.places import Place, Report
from selection.corpus.routing import routing_inputs_of
from selection.engine.index import CorpusIndex
from selection.engine.outputs import ContextBundle, ContextTrace, SelectionResult
from selection.engine.routing.types import RoutingInputs
from selection.engine.types import ProjectFrame, Unit, WorkFrame, WorkSignal
from selection.memory import index_cache, live_index
from selection.memory.as_of import UNIT_ROW_FIELDS, unit_from_fields
from selection.models import Corpus, LocalUnit, MemoryUnit, Project, Task, Trace, UnitLink, UnitStatus

_index_lock = threading.Lock()


def frame_from_snapshot(*, project: Project, number: int, snapshot: dict) -> ProjectFrame:
    """An engine ProjectFrame from a FrameVersion snapshot (the corpus.yaml frame mapping)."""
    declared = list(
        Project.objects.filter(corpus_id=project.corpus_id).values_list("slug", flat=True)
    )
    report = Report()
    frame = check_frame(snapshot, Place("frame"), report, project=project.slug, declared=declared)
    if frame is None:
        raise CorpusError(report.issues)
    return replace(frame, version=number)


_FRAMES: OrderedDict[int, tuple[int, ProjectFrame]] = OrderedDict()
_FRAMES_SIZE = 256


def frame_of_version(version_id: int, *, version=None) -> tuple[int, ProjectFrame]:
    """(number, engine ProjectFrame) of a FrameVersion, parsed once per process: FrameVersion
    rows are append-only (a trigger refuses UPDATE), so a parsed frame never goes stale."""
    with _index_lock:
        cached = _FRAMES.get(version_id)
    if cached is not None:
        return cached
    if version is None:
        version = frame_version_by_id(version_id=version_id)
    frame = frame_from_snapshot(project=version.project, number=version.number, snapshot=version.snapshot)
    parsed = (version.number, frame)
    with _index_lock:
        _FRAMES[version_id] = parsed
        while len(_FRAMES) > _FRAMES_SIZE:
            _FRAMES.popitem(last=False)
    return parsed


def unit_links(corpus_id: int) -> dict[int, dict[str, list[str]]]:
    """Links of every unit of a corpus, by source row id, in file order."""
    links: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    rows = (
        UnitLink.objects.filter(source__corpus_id=corpus_id)
        .order_by("source_id", "kind", "position")
        .values_list("source_id", "kind", "target__uid")
    )
    for source_id, kind, target in rows.iterator(chunk_size=5000):
        links[source_id][kind].append(target)
    return links


# a row's fields as an engine Unit: one function for rows and for MemoryChange states
unit_from_values = unit_from_fields


# the row fields an engine Unit is made of (as_of reads the same, beside a change's state)
UNIT_FIELDS = UNIT_ROW_FIELDS


def load_units(
    corpus_id: int, *, with_vectors: bool = True
) -> tuple[list[Unit], np.ndarray | None]:
    slugs = dict(Project.objects.filter(corpus_id=corpus_id).values_list("id", "slug"))
    links = unit_links(corpus_id)
    fields = UNIT_FIELDS + (("embedding",) if with_vectors else ())
    units: list[Unit] = []
    vectors: list[np.ndarray] = []
    missing_vector = False
    for values in (
        # a candidate (or a declined one) is stored, never selected
        MemoryUnit.objects.filter(corpus_id=corpus_id, status=UnitStatus.ACTIVE)
        .order_by("position")
        .values(*fields)
        .iterator(chunk_size=5000)
    ):
        units.append(
            unit_from_values(values, slugs[values["project_id"]], links.get(values["id"], {}))
        )
        if with_vectors:
            vector = values["embedding"]
            if vector is None:
                missing_vector = True
            else:
                vectors.append(np.asarray(vector, dtype=np.float32))
    if not with_vectors or missing_vector or not vectors:
        return units, None
    return units, np.vstack(vectors)


def corpus_index(corpus: Corpus | int, *, as_of: int | None = None) -> CorpusIndex:
    """The engine index of a corpus now, or as of memory sequence `as_of`: a base index plus the
    units changed since, followed by one primary-key read per call (selection.memory.live_index;
    the base is read from the index cache, selection/memory/index_cache.py, or built from rows).
    With FG_DENSE_SEARCHER=pgvector-hnsw no vector is loaded: PostgreSQL answers dense search
    (selection/hnsw). The index carries `memory_sequence`, the sequence it covers."""
    return live_index.corpus_index(corpus, as_of=as_of)


def corpus_index_fingerprint(corpus_id: int, index: CorpusIndex) -> str:
    """What a result computed over `index` (a corpus_index of the corpus) depends on: the base
    key, the corpus's revision and the memory sequence the index covers."""
    fingerprint = getattr(index, "fingerprint", None)
    if fingerprint is not None:
        return fingerprint
    return index_cache.corpus_fingerprint(corpus_id)


def forget_index(corpus_id: int, *, files: bool = False) -> None:
    """Drop this process's index of the corpus; `files`: its index cache files too (an erasure:
    no copy of the erased text may stay on disk)."""
    live_index.forget(corpus_id)
    if files:
        index_cache.discard(corpus_id)


def local_units_for(*, user, project: Project) -> tuple[Unit, ...]:
    """The user's local overlay units in the project, as engine units (empty without a user)."""
    if user is None or not getattr(user, "pk", None):
        return ()
    rows = LocalUnit.objects.filter(user=user, project=project).order_by("uid")
    return tuple(
        Unit(
            id=row.uid,
            project=project.slug,
            evidence_class=row.evidence_class,
            text=row.text,
            title=row.title,
            supersedes=tuple(row.supersedes or ()),
            subject=row.subject or None,
            facet=row.facet or None,
        )
        for row in rows
    )


def routing_inputs_for_task(task: Task) -> RoutingInputs:
    """The task's declared routing inputs (its tasks.yaml `routing:` block), replayed as written."""
    return routing_inputs_of(task.routing)


def work_frame_for_task(task: Task, *, work_type: str | None = None) -> WorkFrame:
    """The task's declared WorkFrame; `work_type` replaces the declared one (the hazard experiment)."""
    frame = task.frame or {}
    signals = tuple(
        WorkSignal(id=s.uid, kind=s.kind, content=s.content)
        for s in task.signals.all().order_by("position")
    )
    cites = tuple((name, tuple(ids)) for name, ids in (frame.get("cites") or {}).items())
    declared_type = frame.get("work_type")
    if work_type is not None and work_type != declared_type:
        # a substituted work type is licensed by no signal: it is shown as a guess
        cites = tuple((name, ids) for name, ids in cites if name != "work_type")
    return WorkFrame(
        objective=frame.get("objective", "") or "",
        work_type=work_type if work_type is not None else declared_type,
        constraints=tuple(frame.get("constraints") or ()),
        signals=signals,
        standpoint=task.standpoint or task.corpus.standpoint,
        establishment="declared",
        cites=cites,
    )


def units_by_uid(*, corpus_id: int, uids) -> dict[str, Unit]:
    """Engine Units for a few unit ids of a corpus (near misses, counterfactual pages)."""
    uids = sorted(set(uids))
    if not uids:
        return {}
    rows = list(MemoryUnit.objects.filter(corpus_id=corpus_id, uid__in=uids).values(*UNIT_FIELDS, "project__slug"))
    links: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for source_id, kind, target in (
        UnitLink.objects.filter(source_id__in=[r["id"] for r in rows])
        .order_by("source_id", "kind", "position")
        .values_list("source_id", "kind", "target__uid")
    ):
        links[source_id][kind].append(target)
    return {r["uid"]: unit_from_values(r, r["project__slug"], links.get(r["id"], {})) for r in rows}


def trace_result(trace: Trace) -> SelectionResult:
    """The engine's SelectionResult rebuilt from a stored trace (diffs, replays, verification)."""
    doc = dict(trace.header)
    doc["candidates"] = [c.record for c in trace.candidates.order_by("position")]
    return SelectionResult(bundle=ContextBundle.from_dict(trace.bundle), trace=ContextTrace.from_dict(doc))
