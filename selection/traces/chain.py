"""Tamper evidence: each project's traces form a hash chain that anyone can re-verify.

A trace's digest is SHA-256 over its stored content (the trace row and every candidate row) and the
digest of the project's previous trace. Writers take a per-project advisory lock for the rest of
their transaction, so concurrent writers (backtest workers, evaluations, the dashboard) append one
after another; a unique (project, chain_position) constraint backs the lock up. Rows are
append-only (a trigger), so a changed digest, a changed row or a deleted trace shows up as a broken
link, named by trace id, in `verify_traces` and on the chain page.

Retention and erasure change a trace after it was written, and only through `trace_tombstone`: it
appends a TraceTombstone with the content digest before and after the change, then updates the
row (or deletes its candidates) while a session-local setting lets the trigger pass exactly that
change. The chain digest is never rewritten: verification checks the first tombstone's "before"
against it, each tombstone against the next, and the last "after" against the row as it is now, so
it tells "erased (or expired), chain intact" from "altered".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from enum import Enum
from json.encoder import encode_basestring
from typing import Any

from django.db import connection, transaction

from authority.db import TOMBSTONE_SETTING
from selection.models import Project, Trace, TraceCandidate, TraceTombstone

# pg_advisory_xact_lock(class, project id): the class keeps these locks apart from any other's
CHAIN_LOCK_CLASS = 7_104_201
CHAIN_GENESIS = "0" * 64  # the "previous digest" of a project's first trace
VERIFY_BATCH = 500

_TRACE_FIELDS = (
    "project_id", "frame_version", "task_id", "condition", "query", "standpoint", "budget_tokens",
    "policy_version", "engine_version", "bundle_digest", "bundle_tokens", "admitted", "header",
    "bundle", "source", "created_at",
)  # fmt: skip
_CANDIDATE_FIELDS = (
    "position", "unit_uid", "project_slug", "evidence_class", "disposition", "stage",
    "reason_code", "record",
)  # fmt: skip


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return value


# json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False), its encoder built once
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical(value: Any) -> str:
    """The JSON text digests are taken over: sorted keys, no whitespace, UTF-8 as is."""
    return _CANONICAL.encode(value)


def _fields_of(cls: type):
    """A function giving a dataclass's fields as a dict (no conversion), compiled once per type."""
    names = tuple(f.name for f in fields(cls))
    source = "def shallow(value):\n    return {" + ", ".join(f"{n!r}: value.{n}" for n in names) + "}"
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<fields of {cls.__qualname__}>", "exec"), namespace)  # noqa: S102
    return namespace["shallow"]


_SHALLOW: dict[type, Any] = {}


def _engine_default(value: Any) -> Any:
    """What the JSON encoder cannot encode itself, one level at a time, as to_jsonable would give it
    (selection.engine.serialisation): a dataclass's fields, an Enum's value, a datetime's ISO text,
    a mapping with str keys; anything else raises TypeError, as to_jsonable does."""
    try:
        return _SHALLOW[type(value)](value)
    except KeyError:
        pass
    cls = type(value)
    if is_dataclass(cls):
        shallow = _SHALLOW[cls] = _fields_of(cls)
        return shallow(value)
    if isinstance(value, Enum):
        return value._value_
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): value[k] for k in value}
    raise TypeError(f"{cls.__name__} is not serialisable: {value!r}")


# canonical() of to_jsonable(value), straight from the engine's frozen dataclasses: the C encoder
# walks them (lists, floats and strings in C), calling _engine_default once per nested dataclass,
# instead of to_jsonable building every dict in Python first (half a replay's trace-write time)
_CANONICAL_ENGINE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False,
    default=_engine_default,
)


def canonical_engine(value: Any) -> str:
    """canonical(to_jsonable(value)) for an engine value (a CandidateRecord), without the dicts:
    the same text (tests/selection/test_trace_chain.py checks it over real traces)."""
    return _CANONICAL_ENGINE.encode(value)


_CANDIDATE_KEYS = tuple(sorted(_CANDIDATE_FIELDS))
_KEY_TEXT = {name: canonical(name) + ":" for name in _CANDIDATE_KEYS}


def _scalar(value: Any) -> str:
    """canonical() of a column value, with the encoder's own functions for str, None and int."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value)  # what the encoder uses for a str when ensure_ascii=False
    if value is None:
        return "null"
    if kind is int:
        return int.__repr__(value)
    return canonical(_plain(value))


def _candidate_text(candidate: dict[str, Any], record_text: str | None) -> str:
    parts = []
    for name in _CANDIDATE_KEYS:
        if name == "record":
            parts.append(_KEY_TEXT[name] + (record_text if record_text is not None else canonical(candidate[name])))
        else:
            parts.append(_KEY_TEXT[name] + _scalar(candidate[name]))
    return "{" + ",".join(parts) + "}"


def content_digest(
    trace: dict[str, Any], candidates: Iterable[dict[str, Any]], record_texts: Iterable[str] | None = None
) -> str:
    """SHA-256 of a trace's stored fields and its candidates' (dicts keyed by field name): of
    canonical({"trace": {...}, "candidates": [{...}, ...]}).

    The text is put together part by part, which gives the very text canonical() of the whole
    document gives (tests/selection/test_chain.py checks it), so that a writer that already holds
    each candidate's record as canonical text (`record_texts`, what it COPYs) does not encode the
    records a second time.
    """
    texts = iter(record_texts) if record_texts is not None else None
    candidate_texts = [_candidate_text(c, next(texts) if texts is not None else None) for c in candidates]
    trace_text = canonical({name: _plain(trace[name]) for name in _TRACE_FIELDS})
    # sorted keys: "candidates" before "trace"
    text = '{"candidates":[' + ",".join(candidate_texts) + '],"trace":' + trace_text + "}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def link_digest(content: str, previous: str) -> str:
    return hashlib.sha256(f"{previous}:{content}".encode("ascii")).hexdigest()


def _as_fields(obj, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in names}


def chain_link(
    traces: list[tuple[Trace, list[TraceCandidate]]], record_texts: list[list[str]] | None = None
) -> None:
    """Set chain_position, previous_digest and digest on unsaved traces, in the order given.
    `record_texts`: each trace's candidates' records as canonical() text, when the writer has them.

    Call inside the transaction that inserts them: it locks each project's chain until commit.
    """
    projects = sorted({trace.project_id for trace, _ in traces})
    heads: dict[int, tuple[int, str]] = {}
    with connection.cursor() as cursor:
        for project_id in projects:  # sorted: two writers never wait on each other in a cycle
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [CHAIN_LOCK_CLASS, project_id])
            head = (
                Trace.objects.filter(project_id=project_id, chain_position__isnull=False)
                .order_by("-chain_position")
                .values_list("chain_position", "digest")
                .first()
            )
            heads[project_id] = head or (0, CHAIN_GENESIS)
    for i, (trace, candidates) in enumerate(traces):
        position, previous = heads[trace.project_id]
        content = content_digest(
            _as_fields(trace, _TRACE_FIELDS),
            [_as_fields(c, _CANDIDATE_FIELDS) for c in candidates],
            record_texts[i] if record_texts is not None else None,
        )
        trace.chain_position = position + 1
        trace.previous_digest = previous
        trace.digest = link_digest(content, previous)
        heads[trace.project_id] = (trace.chain_position, trace.digest)


# --- verification ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokenLink:
    trace_id: int
    position: int | None
    problem: str

    def __str__(self) -> str:
        where = f"position {self.position}" if self.position is not None else "no position"
        return f"trace #{self.trace_id} ({where}): {self.problem}"


@dataclass(frozen=True)
class ChainReport:
    project: str
    traces: int
    broken: tuple[BrokenLink, ...] = field(default_factory=tuple)
    erased: int = 0  # traces with a unit's text erased, their tombstones verified
    expired: int = 0  # traces whose payload the retention policy removed, verified

    @property
    def intact(self) -> bool:
        return not self.broken

    @property
    def tombstones(self) -> str:
        """ "" or " (2 erased, 1 expired: tombstones verified)" for the report line."""
        parts = [f"{n} {what}" for n, what in ((self.erased, "erased"), (self.expired, "expired")) if n]
        return f" ({', '.join(parts)}: tombstones verified)" if parts else ""


def _rows(project: Project) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every trace of the project in chain order with its candidates, in batches."""
    names = ("id", "chain_position", "previous_digest", "digest", "expired_at", *_TRACE_FIELDS)
    traces = (
        Trace.objects.filter(project=project)
        .order_by("chain_position", "id")
        .values(*names)
        .iterator(chunk_size=VERIFY_BATCH)
    )
    batch: list[dict[str, Any]] = []
    for row in traces:
        batch.append(row)
        if len(batch) == VERIFY_BATCH:
            yield from _with_candidates(batch)
            batch = []
    yield from _with_candidates(batch)


def _with_candidates(batch: list[dict[str, Any]]):
    found: dict[int, list[dict[str, Any]]] = {row["id"]: [] for row in batch}
    for row in (
        TraceCandidate.objects.filter(trace_id__in=list(found))
        .order_by("trace_id", "position")
        .values("trace_id", *_CANDIDATE_FIELDS)
    ):
        found[row["trace_id"]].append(row)
    stones: dict[int, list[TraceTombstone]] = {row["id"]: [] for row in batch}
    for stone in TraceTombstone.objects.filter(trace_id__in=list(found)).order_by("trace_id", "sequence"):
        stones[stone.trace_id].append(stone)
    for row in batch:
        row["tombstones"] = stones[row["id"]]
        yield row, found[row["id"]]


def _tombstone_problems(row: dict[str, Any], content: str) -> list[str]:
    """What does not hold in a tombstoned trace: its original content against the chain digest, each
    tombstone against the next, the trace as it is now against the last."""
    stones: list[TraceTombstone] = row["tombstones"]
    problems = []
    if link_digest(stones[0].content_before, row["previous_digest"]) != row["digest"]:
        problems.append("its content before its first tombstone does not match its digest (altered)")
    if [s.sequence for s in stones] != list(range(1, len(stones) + 1)) or any(
        later.content_before != earlier.content_after for earlier, later in zip(stones, stones[1:], strict=False)
    ):
        problems.append("its tombstones do not follow one another (one was altered or removed)")
    if content != stones[-1].content_after:
        problems.append(f"its content changed after its last tombstone ({stones[-1]}) (altered)")
    expired = any(s.kind == "expired" for s in stones)
    if expired != (row["expired_at"] is not None):
        problems.append("its expiry mark and its tombstones disagree (altered)")
    return problems


def verify_chain(project: Project) -> ChainReport:
    """Recompute every digest of the project's chain; name each trace whose link does not hold."""
    broken: list[BrokenLink] = []
    previous, expected_position, count = CHAIN_GENESIS, 1, 0
    erased = expired = 0
    for row, candidates in _rows(project):
        count += 1
        position = row["chain_position"]
        if position is None or not row["digest"]:
            broken.append(BrokenLink(row["id"], None, "carries no digest: it is outside the chain"))
            continue
        if position != expected_position:
            broken.append(
                BrokenLink(
                    row["id"],
                    position,
                    f"follows position {expected_position - 1}: traces {expected_position}..{position - 1} are missing",
                )
            )
        if row["previous_digest"] != previous:
            broken.append(BrokenLink(row["id"], position, "does not link to the previous trace's digest"))
        content = content_digest(row, candidates)
        if row["tombstones"]:
            problems = _tombstone_problems(row, content)
            broken.extend(BrokenLink(row["id"], position, problem) for problem in problems)
            if not problems:
                kinds = {s.kind for s in row["tombstones"]}
                erased += "erased" in kinds
                expired += "expired" in kinds
        elif link_digest(content, row["previous_digest"]) != row["digest"]:
            broken.append(BrokenLink(row["id"], position, "its content no longer matches its digest (altered)"))
        elif row["expired_at"] is not None:
            broken.append(BrokenLink(row["id"], position, "its expiry mark and its tombstones disagree (altered)"))
        previous, expected_position = row["digest"], position + 1
    return ChainReport(project=project.slug, traces=count, broken=tuple(broken), erased=erased, expired=expired)


def verify_chains(projects: Iterable[Project]) -> list[ChainReport]:
    return [verify_chain(project) for project in projects]


# --- tombstones: the one way a written trace changes ---------------------------------------------

# what retention removes; ids, chain fields and the facts of the selection stay (the trigger
# refuses a change to any of those)
EXPIRED_PAYLOAD: dict[str, Any] = {"query": "", "header": {}, "bundle": {}, "admitted": []}


def _stored(trace_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    row = Trace.objects.filter(pk=trace_id).values(*_TRACE_FIELDS).get()
    candidates = list(TraceCandidate.objects.filter(trace_id=trace_id).order_by("position").values(*_CANDIDATE_FIELDS))
    return row, candidates


def trace_tombstone(
    trace_id: int,
    *,
    kind: str,
    changes: dict[str, Any],
    drop_candidates: bool = False,
    actor=None,
    reason: str,
    unit_uid: str = "",
) -> TraceTombstone:
    """Change a written trace: append its tombstone, then update its payload fields (`changes`) and,
    when `drop_candidates`, delete its candidate rows. Its digest and link stay as written.

    Call inside the transaction.atomic of the service that audits the change (retention, erasure).
    """
    if not connection.in_atomic_block:
        raise RuntimeError("trace_tombstone must run inside the service's transaction.atomic")
    unknown = set(changes) - set(EXPIRED_PAYLOAD)
    if unknown:
        raise ValueError(f"a tombstone changes only {sorted(EXPIRED_PAYLOAD)}, not {sorted(unknown)}")
    Trace.objects.select_for_update().filter(pk=trace_id).values_list("pk").get()
    row, candidates = _stored(trace_id)
    before = content_digest(row, candidates)
    after = content_digest({**row, **changes}, [] if drop_candidates else candidates)
    sequence = TraceTombstone.objects.filter(trace_id=trace_id).count() + 1
    stone = TraceTombstone.objects.create(
        trace_id=trace_id,
        sequence=sequence,
        kind=kind,
        content_before=before,
        content_after=after,
        unit_uid=unit_uid,
        actor=actor if getattr(actor, "pk", None) else None,
        actor_label=getattr(actor, "username", None) or "system",
        reason=reason,
    )
    with transaction.atomic(), connection.cursor() as cursor:
        # on for these statements only; a failure rolls the savepoint back, the setting with it
        cursor.execute("SELECT set_config(%s, 'on', true)", [TOMBSTONE_SETTING])
        fields = dict(changes)
        if kind == "expired":
            fields["expired_at"] = stone.created_at
        Trace.objects.filter(pk=trace_id).update(**fields)
        if drop_candidates:
            TraceCandidate.objects.filter(trace_id=trace_id).delete()
        cursor.execute("SELECT set_config(%s, 'off', true)", [TOMBSTONE_SETTING])
    return stone
