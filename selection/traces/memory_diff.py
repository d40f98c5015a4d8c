"""What memory did between two traces of a corpus: the corpus digest each selection read, and the
units added, changed or erased in between, from the corpus's memory sequence (MemoryChange rows).

A trace with a memory sequence is placed by it; a trace written before memory had one (its
`memory_sequence` null) is placed by its time, and the unit sets are compared as they stood then.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils import timezone

from selection.models import MemoryChange, MemoryChangeKind, Trace


@dataclass(frozen=True)
class MemoryDiff:
    digest_a: str
    digest_b: str
    size_a: int | None
    size_b: int | None
    placed_by: str  # "sequence" | "time"
    point_a: str  # the sequence number or time each trace is placed at, in words
    point_b: str
    backwards: bool  # b is the older trace: the changes are listed from b to a
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    erased: tuple[str, ...] = ()
    kinds: dict = field(default_factory=dict)  # unit id -> the change kinds in between

    @property
    def digest_changed(self) -> bool:
        return bool(self.digest_a and self.digest_b and self.digest_a != self.digest_b)

    @property
    def units_changed(self) -> int:
        return len(self.added) + len(self.changed) + len(self.erased)

    @property
    def same(self) -> bool:
        return not self.digest_changed and not self.units_changed


def _retriever(header: dict) -> dict:
    return (header or {}).get("retriever") or {}


def memory_diff(a: Trace, b: Trace, engine_a=None, engine_b=None) -> MemoryDiff | None:
    """The memory change from trace `a` to trace `b` (None when they read different corpora).
    `engine_a`/`engine_b`: the ContextTraces read back, whose retriever records the corpus digest."""
    if a.project.corpus_id != b.project.corpus_id:
        return None
    ra = engine_a.retriever if engine_a is not None else None
    rb = engine_b.retriever if engine_b is not None else None
    digest_a = ra.corpus_digest if ra else str(_retriever(a.header).get("corpus_digest", ""))
    digest_b = rb.corpus_digest if rb else str(_retriever(b.header).get("corpus_digest", ""))
    size_a = ra.corpus_size if ra else _retriever(a.header).get("corpus_size")
    size_b = rb.corpus_size if rb else _retriever(b.header).get("corpus_size")
    changes = MemoryChange.objects.filter(corpus_id=a.project.corpus_id)
    if a.memory_sequence is not None and b.memory_sequence is not None:
        placed_by, lo, hi = "sequence", a.memory_sequence, b.memory_sequence
        backwards = hi < lo
        lo, hi = min(lo, hi), max(lo, hi)
        window = changes.filter(sequence__gt=lo, sequence__lte=hi)
        before = changes.filter(sequence__lte=lo)
        point_a, point_b = f"memory sequence {a.memory_sequence}", f"memory sequence {b.memory_sequence}"
    else:
        placed_by, lo, hi = "time", a.created_at, b.created_at
        backwards = hi < lo
        lo, hi = min(lo, hi), max(lo, hi)
        window = changes.filter(recorded_at__gt=lo, recorded_at__lte=hi)
        before = changes.filter(recorded_at__lte=lo)
        point_a, point_b = f"{a.created_at:%Y-%m-%d %H:%M:%S}", f"{b.created_at:%Y-%m-%d %H:%M:%S}"
    kinds: dict[str, list[str]] = {}
    for uid, kind in window.order_by("sequence").values_list("unit__uid", "kind"):
        kinds.setdefault(uid, [])
        if kind not in kinds[uid]:
            kinds[uid].append(kind)
    existed = set(before.filter(unit__uid__in=list(kinds)).values_list("unit__uid", flat=True))
    added, changed, erased = [], [], []
    for uid in sorted(kinds):
        if uid not in existed and MemoryChangeKind.CREATED in kinds[uid]:
            added.append(uid)
        elif MemoryChangeKind.ERASED in kinds[uid]:
            erased.append(uid)
        else:
            changed.append(uid)
    return MemoryDiff(
        digest_a,
        digest_b,
        size_a,
        size_b,
        placed_by,
        point_a,
        point_b,
        backwards,
        tuple(added),
        tuple(changed),
        tuple(erased),
        {uid: tuple(k) for uid, k in kinds.items()},
    )


def memory_since(trace: Trace) -> MemoryDiff | None:
    """The memory change from `trace` to the corpus as it stands now (no digest: nothing ran)."""
    corpus = trace.project.corpus
    now = Trace(
        project=trace.project,
        memory_sequence=corpus.sequence if trace.memory_sequence is not None else None,
        created_at=timezone.now(),
        header={},
    )
    return memory_diff(trace, now)
