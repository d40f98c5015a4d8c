"""Explanations read off a trace: loss funnels, near misses, digest checks and trace diffs.

Pure functions of stored traces and bundles; nothing here re-ranks or guesses. No Django.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .reason_codes import ReasonCode
from .render import item_tokens, render_item
from .routing.report import routing_header
from .types import SIGNAL_NAMES, CandidateRecord, ContextBundle, ContextTrace, Unit

# --------------------------------------------------------------------------------------------
# Loss funnel: where the MUST units of a ledger were lost, stage by stage (aligned with E-codes)
# --------------------------------------------------------------------------------------------

# (key, E-code, label); the order is the pipeline's, the last one is success
FUNNEL_STAGES: tuple[tuple[str, str, str], ...] = (
    ("absent", "E0", "absent from memory"),
    ("never_surfaced", "E1", "never surfaced by retrieval"),
    ("ineligible", "E2", "ruled ineligible"),
    ("lost", "E3", "lost in ranking or to the budget"),
    ("folded", "E5", "folded or rejected as redundant"),
    ("admitted", "", "admitted"),
)
FUNNEL_KEYS = tuple(key for key, _, _ in FUNNEL_STAGES)


@dataclass(frozen=True)
class Outcome:
    """The three facts about one candidate the funnel needs (a CandidateRecord, or a DB row)."""

    disposition: str
    reason_code: str
    eligible: bool


@dataclass(frozen=True)
class FunnelRow:
    key: str
    code: str
    label: str
    count: int
    share: float  # of the MUST units
    remaining: int  # MUST units still alive after this stage (admitted for the last row)


@dataclass(frozen=True)
class LossFunnel:
    must: int  # MUST units counted (over every trace summed)
    counts: tuple[tuple[str, int], ...]  # in FUNNEL_KEYS order
    units: tuple[tuple[str, str], ...] = ()  # (unit id, stage key), single traces only
    traces: int = 1

    def count(self, key: str) -> int:
        return dict(self.counts)[key]

    def stage_of(self, unit_id: str) -> str | None:
        return dict(self.units).get(unit_id)

    @property
    def rows(self) -> tuple[FunnelRow, ...]:
        alive = self.must
        rows = []
        for key, code, label in FUNNEL_STAGES:
            n = self.count(key)
            if key != "admitted":
                alive -= n
            rows.append(
                FunnelRow(
                    key,
                    code,
                    label,
                    n,
                    n / self.must if self.must else 0.0,
                    alive if key != "admitted" else n,
                )
            )
        return tuple(rows)

    @property
    def lost(self) -> int:
        return self.must - self.count("admitted")


def funnel_stage(unit_id: str, outcome: Outcome | None, corpus_ids: Iterable[str] | None) -> str:
    """The funnel stage of one MUST unit; mirrors attribution.attribute()."""
    if corpus_ids is not None and unit_id not in corpus_ids:
        return "absent"
    if outcome is None:
        return "never_surfaced"
    if outcome.disposition == "admitted":
        return "admitted"
    if outcome.disposition == "folded" or outcome.reason_code == ReasonCode.REDUNDANT_WITH_ADMITTED:
        return "folded"
    if not outcome.eligible:
        return "ineligible"
    return "lost"


def loss_funnel(
    outcomes: Mapping[str, Outcome],
    ledger: Mapping[str, str],
    corpus_ids: Iterable[str] | None,
) -> LossFunnel:
    """Of the ledger's MUST units, how many were absent, never surfaced, ineligible, lost, folded
    or admitted. `outcomes`: unit id -> Outcome for every candidate of one trace.
    """
    ids = frozenset(corpus_ids) if corpus_ids is not None else None
    units = tuple(
        (uid, funnel_stage(uid, outcomes.get(uid), ids))
        for uid in sorted(u for u, label in ledger.items() if label == "MUST")
    )
    counts = {key: 0 for key in FUNNEL_KEYS}
    for _, key in units:
        counts[key] += 1
    return LossFunnel(len(units), tuple(counts.items()), units)


def trace_outcomes(candidates: Iterable[CandidateRecord]) -> dict[str, Outcome]:
    return {c.unit_id: Outcome(c.disposition, c.reason_code, c.eligible) for c in candidates}


def sum_funnels(funnels: Iterable[LossFunnel]) -> LossFunnel:
    """The funnel of an evaluation or a backtest side: counts summed over its traces."""
    counts = {key: 0 for key in FUNNEL_KEYS}
    must = traces = 0
    for f in funnels:
        must += f.must
        traces += f.traces
        for key, n in f.counts:
            counts[key] += n
    return LossFunnel(must, tuple(counts.items()), (), traces)


# --------------------------------------------------------------------------------------------
# Bundle items as the budget saw them, including the ones it omitted
# --------------------------------------------------------------------------------------------


def item_members(trace: ContextTrace) -> dict[str, list[CandidateRecord]]:
    """item id -> its members, the unit whose text it carries first, folded ones in fold order."""
    folded_order = {op.unit_id: i for i, op in enumerate(trace.coalescing) if op.op == "fold_echo"}
    members: dict[str, list[CandidateRecord]] = {}
    for c in trace.candidates:
        if c.item_id is not None and c.noted_on is None:
            members.setdefault(c.item_id, []).append(c)
    for item_id, group in members.items():
        group.sort(
            key=lambda c: (
                c.unit_id in folded_order,
                folded_order.get(c.unit_id, -1),
                f"item-{c.unit_id}" != item_id,
            )
        )
    return members


def render_trace_item(trace: ContextTrace, item_id: str, members: Sequence[CandidateRecord], unit: Unit) -> str:
    """Re-render an item (admitted or not) exactly as budget admission rendered it."""
    notes = tuple(op.note for op in trace.coalescing if op.op == "supersession_note" and op.item_id == item_id)
    return render_item(
        sources=[m.unit_id for m in members],
        evidence_class=unit.evidence_class,
        title=unit.title,
        text=unit.text,
        contradicts=tuple(sorted(unit.refutes)),
        notes=notes,
    )


@dataclass(frozen=True)
class GiveWay:
    item_id: str
    sources: tuple[str, ...]
    tokens: int
    rank: int  # position of the item in the bundle, 1-based


@dataclass(frozen=True)
class NearMiss:
    """A candidate rejected only by the budget, what it costs, and what would have to give way."""

    unit_id: str
    item_id: str
    sources: tuple[str, ...]
    rank: int | None
    tokens: int  # the rendered item's cost
    remaining_at_decision: int
    free_at_end: int
    deficit: int  # tokens that must be freed to admit it after the fact
    give_way: tuple[GiveWay, ...]  # the lowest-ranked admitted items whose removal frees enough
    fits_at_all: bool  # False when the item alone exceeds the whole budget


def near_misses(trace: ContextTrace, bundle: ContextBundle, units: Mapping[str, Unit]) -> tuple[NearMiss, ...]:
    """Every item omitted for lack of budget (BUDGET_EXHAUSTED), cheapest deficit first.

    `units` maps unit id -> Unit for at least the omitted items' primary units.
    """
    members = item_members(trace)
    spent = sum(item.tokens for item in bundle.items)
    free = trace.budget_tokens - spent
    out = []
    for item_id, group in members.items():
        primary = group[0]
        if primary.reason_code != ReasonCode.BUDGET_EXHAUSTED or primary.unit_id not in units:
            continue
        cost = item_tokens(render_trace_item(trace, item_id, group, units[primary.unit_id]))
        deficit = max(cost - free, 0)
        give: list[GiveWay] = []
        freed = 0
        fits = cost <= trace.budget_tokens
        if fits:
            for rank in range(len(bundle.items), 0, -1):
                if freed >= deficit:
                    break
                item = bundle.items[rank - 1]
                give.append(GiveWay(item.item_id, item.sources, item.tokens, rank))
                freed += item.tokens
        out.append(
            NearMiss(
                primary.unit_id,
                item_id,
                tuple(m.unit_id for m in group),
                primary.rank,
                cost,
                primary.budget.remaining,
                free,
                deficit,
                tuple(give),
                fits,
            )
        )
    out.sort(key=lambda n: (not n.fits_at_all, n.deficit, n.rank or 0, n.unit_id))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Digest checks
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    expected: str
    actual: str


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_stored_bundle(trace: ContextTrace, bundle: ContextBundle, recorded: str) -> list[Check]:
    """Recompute the digest from the stored bundle's rendered text; `recorded` is the trace row's."""
    digest = sha256(bundle.rendered)
    joined = "".join(item.rendered for item in bundle.items)
    return [
        Check("sha256 of the stored rendered bundle", digest == recorded, recorded, digest),
        Check(
            "trace header digest",
            trace.bundle_digest == recorded,
            recorded,
            trace.bundle_digest,
        ),
        Check(
            "items concatenate to the rendered bundle",
            joined == bundle.rendered,
            sha256(bundle.rendered),
            sha256(joined),
        ),
    ]


def check_rerun(stored: ContextTrace, recorded: str, rerun: ContextTrace) -> list[Check]:
    """Compare a fresh engine run with the same inputs against what was stored."""
    differing = sum(
        1
        for a, b in zip(stored.candidates, rerun.candidates, strict=False)
        if (a.unit_id, a.reason_code) != (b.unit_id, b.reason_code)
    ) + abs(len(stored.candidates) - len(rerun.candidates))
    routing = []
    if stored.routing is not None:
        # a trace made with local overlay units cannot be re-run without them: it says so here
        before, after = routing_header(stored.routing), routing_header(rerun.routing)
        moved = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        routing.append(
            Check(
                "re-run routing",
                not moved,
                f"{stored.routing.completeness}, {len(stored.routing.dispositions)} dispositions",
                f"differs: {', '.join(moved)}" if moved else "identical",
            )
        )
    return [
        Check("re-run bundle digest", rerun.bundle_digest == recorded, recorded, rerun.bundle_digest),
        *routing,
        Check(
            "re-run candidate decisions",
            differing == 0,
            f"{len(stored.candidates)} candidates",
            f"{differing} differ" if differing else f"{len(rerun.candidates)} identical",
        ),
        Check(
            "engine version",
            stored.engine_version == rerun.engine_version,
            stored.engine_version,
            rerun.engine_version,
        ),
        Check(
            "corpus digest",
            stored.retriever.corpus_digest == rerun.retriever.corpus_digest,
            stored.retriever.corpus_digest,
            rerun.retriever.corpus_digest,
        ),
    ]


# --------------------------------------------------------------------------------------------
# Trace diff: the same task under two frame versions or two conditions
# --------------------------------------------------------------------------------------------


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
        "class pull": str(frame.class_pull),
        "scope": ", ".join(frame.scope),
        "engine version": trace.engine_version,
        "policy version": trace.policy_version,
        "bundle digest": trace.bundle_digest,
        "bundle tokens": str(trace.bundle_tokens),
    }


def trace_diff(a: ContextTrace, b: ContextTrace) -> TraceDiff:
    ha = _header(a) | routing_header(a.routing)
    hb = _header(b) | routing_header(b.routing)
    keys = list(ha) + [k for k in hb if k not in ha]
    header = tuple(
        (k, ha.get(k, ""), hb.get(k, "")) for k in keys if ha.get(k, "") != hb.get(k, "")
    )
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
