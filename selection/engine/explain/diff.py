"""Trace diff: the same task under two frame versions, two conditions or two states of memory (the
corpus digest and size each run read), header, units and signals."""

from __future__ import annotations

from dataclasses import dataclass

from ..outputs import SIGNAL_NAMES, ContextTrace
from ..routing.report import routing_header


@dataclass(frozen=True)
class SignalDelta:
    name: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return round(self.b - self.a, 6)


@dataclass(frozen=True)
class UnitChange:
    unit_id: str
    a_disposition: str | None  # None: not a candidate in that trace
    b_disposition: str | None
    a_reason: str | None
    b_reason: str | None
    a_rank: int | None
    b_rank: int | None
    signals: tuple[SignalDelta, ...]  # only the signals that moved


@dataclass(frozen=True)
class TraceDiff:
    header: tuple[tuple[str, str, str], ...]  # (field, a, b) for fields that differ
    admitted: tuple[str, ...]  # admitted (or folded) in b, not in a
    dropped: tuple[str, ...]  # admitted (or folded) in a, not in b
    kept: tuple[str, ...]
    reason_changes: tuple[UnitChange, ...]  # units whose reason code differs (or that appear once)
    signal_changes: tuple[UnitChange, ...]  # candidates in both with at least one signal moved

    @property
    def same_bundle(self) -> bool:
        return not self.admitted and not self.dropped


def _header(trace: ContextTrace) -> dict[str, str]:
    frame = trace.project_frame
    work = trace.work_frame
    return {
        "project": frame.project,
        "frame version": f"v{frame.version}",
        "condition": trace.condition,
        "effective condition": trace.effective_condition,
        "query": trace.query,
        "standpoint": trace.standpoint.isoformat() if trace.standpoint else "",
        "budget": str(trace.budget_tokens),
        "objective": work.objective,
        "work type": work.work_type or "",
        "establishment": work.establishment,
        "classes for the work type": ", ".join(frame.classes_for(work.work_type))
        or f"(default) {', '.join(frame.default_classes)}",
        "frame builder": work.builder,
        "class order used": ", ".join(trace.class_order),
        "why that class order": trace.class_order_reason,
        "class pull": str(frame.class_pull),
        "scope": ", ".join(frame.scope),
        "corpus digest": trace.retriever.corpus_digest,
        "corpus size": f"{trace.retriever.corpus_size} units",
        "engine version": trace.engine_version,
        "policy version": trace.policy_version,
        "bundle digest": trace.bundle_digest,
        "bundle tokens": str(trace.bundle_tokens),
    }


def trace_diff(a: ContextTrace, b: ContextTrace) -> TraceDiff:
    ha = _header(a) | routing_header(a.routing)
    hb = _header(b) | routing_header(b.routing)
    keys = list(ha) + [k for k in hb if k not in ha]
    header = tuple((k, ha.get(k, ""), hb.get(k, "")) for k in keys if ha.get(k, "") != hb.get(k, ""))
    in_a, in_b = set(a.admitted_unit_ids()), set(b.admitted_unit_ids())
    ca = {c.unit_id: c for c in a.candidates}
    cb = {c.unit_id: c for c in b.candidates}
    reason_changes, signal_changes = [], []
    for uid in sorted(set(ca) | set(cb)):
        ra, rb = ca.get(uid), cb.get(uid)
        deltas: tuple[SignalDelta, ...] = ()
        if ra is not None and rb is not None:
            deltas = tuple(
                SignalDelta(n, getattr(ra.signals, n), getattr(rb.signals, n))
                for n in SIGNAL_NAMES
                if getattr(ra.signals, n) != getattr(rb.signals, n)
            )
        change = UnitChange(
            uid,
            ra.disposition if ra else None,
            rb.disposition if rb else None,
            ra.reason_code if ra else None,
            rb.reason_code if rb else None,
            ra.rank if ra else None,
            rb.rank if rb else None,
            deltas,
        )
        if change.a_reason != change.b_reason:
            reason_changes.append(change)
        if deltas:
            signal_changes.append(change)
    return TraceDiff(
        header=header,
        admitted=tuple(sorted(in_b - in_a)),
        dropped=tuple(sorted(in_a - in_b)),
        kept=tuple(sorted(in_a & in_b)),
        reason_changes=tuple(reason_changes),
        signal_changes=tuple(signal_changes),
    )
