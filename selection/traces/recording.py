"""Traces written: a selection's header row and its candidates, chained, in one transaction; never updated."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import fields as dataclass_fields

from django.db import connection, transaction
from django.utils import timezone

from selection.engine.outputs import ContextTrace, SelectionResult
from selection.engine.serialisation import to_jsonable
from selection.models import Project, Task, Trace, TraceCandidate
from selection.traces.chain import canonical_engine, chain_link


def trace_write(
    result: SelectionResult,
    *,
    project: Project,
    frame_version: int,
    task: Task | None,
    source: str,
    memory_sequence: int | None = None,
) -> Trace:
    """Persist a trace: one header row, one row per candidate; neither is ever updated.
    `memory_sequence`: the corpus's memory sequence the selection's index was at."""
    entry = TraceEntry(result, project, frame_version, task, source, memory_sequence)
    return traces_write([entry])[0]


@dataclass(frozen=True)
class TraceEntry:
    """One selection to persist with `traces_write`."""

    result: SelectionResult
    project: Project
    frame_version: int
    task: Task | None
    source: str
    # the memory sequence of the index the selection ran over (a column beside the chained
    # content: the trace digest and the chain do not read it)
    memory_sequence: int | None = None


def traces_write(entries: list[TraceEntry]) -> list[Trace]:
    """Persist many traces in one bulk insert of their headers and one COPY of every candidate, in
    entry order. Each candidate's record is encoded to JSON text once (chain.canonical_engine): the text
    the chain digest is taken over is the text COPY sends."""
    headers: list[Trace] = []
    rows: list[_CandidateRow] = []
    built = []
    texts: list[list[str]] = []
    for entry in entries:
        trace, candidates, records = _trace_rows(entry)
        headers.append(trace)
        rows.extend(candidates)
        built.append((trace, candidates))
        texts.append(records)
    with transaction.atomic():
        # each project's chain is locked from here to commit: its writers append one at a time
        chain_link(built, texts)
        Trace.objects.bulk_create(headers, batch_size=500)
        # each candidate's trace got its pk from the insert above (PostgreSQL returns ids)
        _copy_candidates(rows, [text for records in texts for text in records])
    return headers


_CANDIDATE_COLUMNS = (
    "trace_id", "position", "unit_uid", "project_slug", "evidence_class", "disposition", "stage",
    "reason_code", "record",
)


@dataclass(frozen=True)
class _CandidateRow:
    """A TraceCandidate row to COPY (the fields chain.content_digest reads, and its trace)."""

    trace: Trace
    position: int
    unit_uid: str
    project_slug: str
    evidence_class: str
    disposition: str
    stage: str
    reason_code: str
    record: str  # its canonical JSON text (what COPY sends and the chain digest reads)


def _copy_candidates(rows: list[_CandidateRow], records: list[str]) -> None:
    """COPY the candidate rows in one stream, each record as the JSON text already encoded:
    bulk_create quotes every JSON record client-side, which cost ~10x more for a 40-candidate
    trace (docs/performance.md)."""
    if not rows:
        return
    table = TraceCandidate._meta.db_table
    sql = f"COPY {table} ({', '.join(_CANDIDATE_COLUMNS)}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row, record in zip(rows, records, strict=True):
            copy.write_row(
                (
                    row.trace.pk, row.position, row.unit_uid, row.project_slug,
                    row.evidence_class, row.disposition, row.stage, row.reason_code,
                    record,
                )
            )


_HEADER_FIELDS = tuple(f.name for f in dataclass_fields(ContextTrace) if f.name != "candidates")


def _plain_text(value) -> str:
    """A candidate's column value as its JSON form gives it (a str, or a str Enum's value)."""
    return value if type(value) is str else to_jsonable(value)


def _trace_rows(entry: TraceEntry) -> tuple[Trace, list[_CandidateRow], list[str]]:
    """The trace's header row, its candidate rows, and each candidate's record as JSON text.

    The header is the trace's JSON form less its candidates; each candidate's record goes straight
    from the frozen CandidateRecord to its canonical text (chain.canonical_engine), never through a
    dict, and its columns are read off the record."""
    result, engine_trace = entry.result, entry.result.trace
    trace_doc = {name: to_jsonable(getattr(engine_trace, name)) for name in _HEADER_FIELDS}
    trace = Trace(
        created_at=timezone.now(),
        project=entry.project,
        frame_version=entry.frame_version,
        task=entry.task,
        condition=engine_trace.condition,
        query=engine_trace.query,
        standpoint=engine_trace.standpoint,
        budget_tokens=engine_trace.budget_tokens,
        policy_version=engine_trace.policy_version,
        engine_version=engine_trace.engine_version,
        bundle_digest=result.bundle.digest,
        bundle_tokens=result.bundle.tokens,
        admitted=list(result.bundle.unit_ids()),
        header=trace_doc,
        bundle=result.bundle.as_dict(),
        source=entry.source,
        memory_sequence=entry.memory_sequence,
    )
    rows = []
    texts = []
    for i, record in enumerate(engine_trace.candidates):
        text = canonical_engine(record)
        rows.append(
            _CandidateRow(
                trace, i, _plain_text(record.unit_id), _plain_text(record.project),
                _plain_text(record.evidence_class), _plain_text(record.disposition),
                _plain_text(record.stage), _plain_text(record.reason_code), text,
            )
        )
        texts.append(text)
    return trace, rows, texts
