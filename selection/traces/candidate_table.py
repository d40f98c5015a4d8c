"""The trace page's candidate table: one row per candidate, filtered and sorted server-side.

Plain Python over engine records (no ORM): views hand in the trace, the ledger labels and the
E-codes the selectors computed; the same rows feed the page, the htmx partial and the CSV export.
Each row carries its signals as `SignalPart`s: the value beside how it entered the rank score
(the engine's recorded contribution), so the page never shows a signal that decided nothing as
if it had.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from selection.engine.outputs import SIGNAL_NAMES, CandidateRecord, ContextTrace, Effect
from selection.engine.reason_codes import Disposition, Stage

SIGNAL_SHORT = {
    "query_relevance": "query",
    "objective_relevance": "objective",
    "goal_relevance": "goal",
    "project_relevance": "project",
    "temporal_validity": "temporal",
    "evidence_strength": "evidence",
    "open_loop_relevance": "open loop",
    "adjacency": "adjacency",
    "recency": "recency",
    "redundancy": "redundancy",
}


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    title: str = ""
    numeric: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("pos", "#", "position in the candidate pool", True),
    Column("unit", "unit"),
    Column("label", "label", "ledger label of the trace's task"),
    Column("ecode", "E", "failure attribution (E0–E6)"),
    Column("cls", "class"),
    Column("project", "project"),
    Column("sources", "sources", "retrieval lists that surfaced it, or what pulled it"),
    Column("bm25_rank", "bm25", "rank in the query's BM25 list", True),
    Column("dense_rank", "dense", "rank in the query's dense list", True),
    Column("obj_bm25_rank", "obj bm25", "rank in the objective's BM25 list", True),
    Column("obj_dense_rank", "obj dense", "rank in the objective's dense list", True),
    Column("fused_rank", "fused", "rank after reciprocal rank fusion", True),
    Column("retrieval_rank", "retr.", "retrieval rank (the class-absent rule reads it)", True),
    *(Column(n, SIGNAL_SHORT[n], n.replace("_", " "), True) for n in SIGNAL_NAMES),
    Column(
        "contributions",
        "score parts",
        "what entered the rank score and by how much; they sum to the score (signals that changed nothing omitted)",
    ),
    Column("eligibility", "eligibility", "every eligibility rule that ran"),
    Column("bucket", "bucket", "class-preference tier (0 = most preferred)", True),
    Column("rank_score", "score", "rank score inside the bucket", True),
    Column("rank", "rank", "position after ranking", True),
    Column("tokens", "tokens", "the unit's own estimated tokens", True),
    Column("stage", "stage", "the stage that disposed of it"),
    Column("reason", "reason code"),
    Column("budget", "budget left", "remaining budget when it was decided (spent/remaining)", True),
    Column("disposition", "disposition"),
)
COLUMN_KEYS = frozenset(c.key for c in COLUMNS)
# columns the template renders with their own markup; the ones between are plain text
_SPECIAL_HEAD, _SPECIAL_TAIL = 4, 3  # pos, unit, label, ecode ... reason, budget, disposition
NOT_ADMITTED = "not-admitted"  # a disposition filter value: rejected, budget_omitted or folded


# how a signal stands in one candidate's rank score (SignalPart.state)
ENTERED = "entered"  # a non-zero part of the rank score
NO_EFFECT = "no-effect"  # entered the formula but changed nothing here (x 1, + w x 0, a zero share)
INFORMATIONAL = "informational"  # did not enter the rank score; the engine calls it informational
ELSEWHERE = "elsewhere"  # did not enter the rank score; the note says where it acted, if anywhere
NOT_RANKED = "not-ranked"  # no rank score decided it: rejected before ranking, or routed in
NOT_RECORDED = "not-recorded"  # the trace predates recorded contributions
STATE_TAGS = {
    NO_EFFECT: "no effect",
    INFORMATIONAL: "informational",
    ELSEWHERE: "not in score",
}  # not recorded: the page says so once, above the table, and in the score parts


def _signed(value: float) -> str:
    if value == 0:
        return "0"
    return f"{value:+.3f}" if abs(value) >= 0.0005 else f"{value:+.1e}"


@dataclass(frozen=True)
class SignalPart:
    """One signal of one candidate as the page shows it: its value, and whether and how it
    entered the rank score (the engine's Contribution for it; None when none is recorded)."""

    signal: str
    value: float
    state: str
    contribution: float | None = None
    effect: str = ""
    note: str = ""

    @property
    def entered(self) -> bool:
        return self.state == ENTERED

    @property
    def value_text(self) -> str:
        return f"{self.value:.3f}"

    @property
    def contribution_text(self) -> str:
        """The part as text, e.g. "+0.310", for a signal that entered the score; else "" (see tag)."""
        if self.state == ENTERED and self.contribution is not None:
            return _signed(self.contribution)
        return ""

    @property
    def tag(self) -> str:
        return STATE_TAGS.get(self.state, "")

    @property
    def explanation(self) -> str:
        """The cell's title (the column names the signal): the effect and the engine's note."""
        how = f"{self.effect}: {self.note}" if self.note else self.effect
        if self.state == ENTERED:
            return how
        if self.state == NO_EFFECT:
            return f"{how}; changed nothing here"
        if self.state in (INFORMATIONAL, ELSEWHERE):
            return f"not in the rank score: {self.note}" if self.note else "not in the rank score"
        if self.state == NOT_RECORDED:
            return "contribution not recorded (the trace predates them)"
        return "no rank score decided this candidate"


def signal_parts(record: CandidateRecord, *, recorded: bool = True) -> dict[str, SignalPart]:
    """Each of the ten signals of a candidate with its recorded part in the rank score. In a trace
    that records contributions (`recorded`), a candidate without any had no rank score decide it
    (rejected before ranking, or a routed unit); otherwise a ranked one's parts are not recorded."""
    own = {p.signal: p for p in record.contributions}
    parts = {}
    for name in SIGNAL_NAMES:
        value = getattr(record.signals, name)
        part = own.get(name)
        if part is None:
            if record.contributions:  # recorded for the candidate, none for this signal
                state = ELSEWHERE
            elif recorded or record.rank is None:
                state = NOT_RANKED
            else:
                state = NOT_RECORDED
            parts[name] = SignalPart(name, value, state)
            continue
        if part.effect == Effect.NONE:
            state = INFORMATIONAL if part.note.startswith("informational") else ELSEWHERE
        else:
            state = ENTERED if part.value != 0 else NO_EFFECT
        parts[name] = SignalPart(name, value, state, part.value, part.effect, part.note)
    return parts


def contributions_recorded(trace: ContextTrace) -> bool:
    """Whether the trace records contributions: a trace that records none has none on any
    candidate (one where no rank score decided any candidate, all rejected before ranking or
    routed in, has nothing to record either)."""
    return any(c.contributions for c in trace.candidates) or not any(
        c.rank is not None and c.stage != Stage.ROUTING for c in trace.candidates
    )


def idle_signals(rows: Sequence[CandidateRow]) -> list[str]:
    """The signals that entered no candidate's rank score in this trace (all rows, unfiltered);
    empty when the trace records no contributions."""
    ranked = [r for r in rows if r.record.contributions]
    if not ranked:
        return []
    return [n for n in SIGNAL_NAMES if not any(r.parts[n].entered for r in ranked)]


@dataclass(frozen=True)
class CandidateRow:
    record: CandidateRecord
    label: str  # "" without a ledger
    ecode: str
    values: dict  # column key -> sortable value (None sorts last)
    parts: dict  # signal name -> SignalPart

    @property
    def admitted(self) -> bool:
        return self.record.disposition == Disposition.ADMITTED

    @property
    def missed_must(self) -> bool:
        return self.label == "MUST" and self.record.disposition != Disposition.ADMITTED

    @property
    def cells(self) -> list[str]:
        """Display strings in COLUMNS order (formatted once here: the page renders 200+ rows)."""
        return [_display(self.values[c.key]) for c in COLUMNS]

    @property
    def plain_cells(self) -> list[str]:
        return [_display(self.values[c.key]) for c in COLUMNS[_SPECIAL_HEAD:-_SPECIAL_TAIL]]


def _display(value) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _contributions(record: CandidateRecord, *, recorded: bool = True) -> str:
    """The signals that entered the rank score and by how much, e.g. "query +0.61 objective +0.29
    temporal -0.68"; a signal with effect none, or a part of zero, decided nothing and is left
    out. A ranked candidate of a trace that predates contributions reads "not recorded"; one no
    rank score decided has none ("")."""
    if not recorded and record.rank is not None:
        return "not recorded"
    parts = [
        f"{SIGNAL_SHORT.get(p.signal, p.signal)} {p.value:+.3f}"
        for p in record.contributions
        if p.effect != Effect.NONE and p.value != 0
    ]
    return " ".join(parts)


def _eligibility(record: CandidateRecord) -> str:
    return " ".join(f"{c.rule}{'✓' if c.passed else '✗'}" for c in record.eligibility) or "—"


def candidate_rows(trace: ContextTrace, labels: Mapping[str, str], ecodes: Mapping[str, str]) -> list[CandidateRow]:
    rows = []
    recorded = contributions_recorded(trace)
    for pos, c in enumerate(trace.candidates, start=1):
        r, s = c.retrieval, c.signals
        label = labels.get(c.unit_id, "DISTRACTOR" if labels else "")
        values = {
            "pos": pos,
            "unit": c.unit_id,
            "label": label,
            "ecode": ecodes.get(c.unit_id, ""),
            "cls": c.evidence_class,
            "project": c.project,
            "sources": ", ".join(r.sources),
            "bm25_rank": r.bm25_rank,
            "dense_rank": r.dense_rank,
            "obj_bm25_rank": r.objective_bm25_rank,
            "obj_dense_rank": r.objective_dense_rank,
            "fused_rank": r.fused_rank,
            "retrieval_rank": r.retrieval_rank,
            **{n: getattr(s, n) for n in SIGNAL_NAMES},
            "contributions": _contributions(c, recorded=recorded),
            "eligibility": _eligibility(c),
            "bucket": c.bucket,
            "rank_score": c.rank_score,
            "rank": c.rank,
            "tokens": c.unit_tokens,
            "stage": c.stage,
            "reason": c.reason_code,
            "budget": c.budget.remaining,
            "disposition": c.disposition,
        }
        rows.append(CandidateRow(c, label, values["ecode"], values, signal_parts(c, recorded=recorded)))
    return rows


@dataclass(frozen=True)
class TableQuery:
    """Filters (each a set of allowed values; empty = any) and the sort column."""

    disposition: tuple[str, ...] = ()
    reason: tuple[str, ...] = ()
    cls: tuple[str, ...] = ()
    project: tuple[str, ...] = ()
    label: tuple[str, ...] = ()
    sort: str = "pos"
    descending: bool = False

    @classmethod
    def from_params(cls, params) -> TableQuery:
        """From a QueryDict-like (getlist) or a plain mapping; unknown sort keys fall back."""

        def many(name: str) -> tuple[str, ...]:
            values = params.getlist(name) if hasattr(params, "getlist") else params.get(name, [])
            if isinstance(values, str):
                values = [values]
            return tuple(v for v in values if v)

        sort = (params.get("sort") or "pos").strip()
        descending = sort.startswith("-")
        sort = sort.lstrip("-")
        if sort not in COLUMN_KEYS:
            sort, descending = "pos", False
        return cls(
            disposition=many("disposition"),
            reason=many("reason"),
            cls=many("class"),
            project=many("project"),
            label=many("label"),
            sort=sort,
            descending=descending,
        )

    @property
    def active(self) -> bool:
        return bool(self.disposition or self.reason or self.cls or self.project or self.label)

    def sort_param(self, key: str) -> str:
        """The ?sort= value a column header links to: toggles when it is the current column."""
        if key == self.sort:
            return key if self.descending else f"-{key}"
        return key

    def params(self, **override) -> list[tuple[str, str]]:
        pairs = [("disposition", v) for v in self.disposition]
        pairs += [("reason", v) for v in self.reason]
        pairs += [("class", v) for v in self.cls]
        pairs += [("project", v) for v in self.project]
        pairs += [("label", v) for v in self.label]
        sort = override.get("sort", ("-" if self.descending else "") + self.sort)
        if sort != "pos":
            pairs.append(("sort", sort))
        return pairs


def _keep(row: CandidateRow, q: TableQuery) -> bool:
    d = row.record.disposition
    if q.disposition and not (d in q.disposition or (NOT_ADMITTED in q.disposition and d != Disposition.ADMITTED)):
        return False
    if q.reason and row.record.reason_code not in q.reason:
        return False
    if q.cls and row.record.evidence_class not in q.cls:
        return False
    if q.project and row.record.project not in q.project:
        return False
    return not (q.label and row.label not in q.label)


def filter_and_sort(rows: Sequence[CandidateRow], q: TableQuery) -> list[CandidateRow]:
    kept = [r for r in rows if _keep(r, q)]
    present = [r for r in kept if r.values[q.sort] not in (None, "")]
    missing = [r for r in kept if r.values[q.sort] in (None, "")]
    # a stable sort over rows in pool order (reverse=True stays stable): ties keep pool order;
    # empty values go last in either direction
    present.sort(key=lambda r: r.values[q.sort], reverse=q.descending)
    return present + missing


def facet_values(rows: Sequence[CandidateRow]) -> dict[str, list[str]]:
    """The distinct values each filter can take in this trace, sorted."""
    return {
        "disposition": sorted({r.record.disposition for r in rows}),
        "reason": sorted({r.record.reason_code for r in rows}),
        "class": sorted({r.record.evidence_class for r in rows}),
        "project": sorted({r.record.project for r in rows}),
        "label": sorted({r.label for r in rows if r.label}),
    }
