"""A backtest as a pull-request comment: one markdown document, the same from the command line
(`manage.py backtest ... --format markdown`) and the API (`GET /api/v1/backtests/{id}?format=markdown`).

It opens with a hidden marker naming the project and proposal, so a CI job can find its earlier
comment and update it instead of adding one per run (docs/ci.md). Then the verdict, the standard
the change was held to, each gate (pass, regress or fail, the mean delta and its 95 % interval),
the tasks that moved, the reason codes whose counts changed, tokens, and links to the backtest and
its trace diffs.
"""

from __future__ import annotations

from collections import Counter

from django.urls import reverse

from rules import gate_verdict as gate_rules
from selection.models import TraceCandidate

from ..models import Backtest, BacktestStatus, ReplaySide, TaskReplay
from . import card, selectors, standards

MARKER = "<!-- frame-governance:backtest project={project} proposal={proposal} -->"
MAX_TASKS = 20  # listed tasks per comment; the backtest page has every one


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _interval(gate: dict) -> str:
    low_high = gate.get("interval")
    if not low_high:
        return "—"
    return f"{gate_rules.signed(low_high[0])} to {gate_rules.signed(low_high[1])}"


def _reason_counts(trace_ids) -> Counter:
    return Counter(TraceCandidate.objects.filter(trace_id__in=list(trace_ids)).values_list("reason_code", flat=True))


def backtest_markdown(backtest: Backtest, *, site: str = "") -> str:
    """The comment for `backtest`; `site` (e.g. https://fg.example.org) makes its links absolute."""
    proposal = backtest.proposal
    project = proposal.project.slug
    page = f"{site}{reverse('backtest-detail', args=[backtest.pk])}"
    lines = [MARKER.format(project=project, proposal=proposal.pk)]
    head = (
        f"{project} proposal #{proposal.pk} “{_cell(proposal.title)}”: "
        f"v{backtest.candidate_version.number} against v{backtest.baseline_version.number}"
    )
    decision = selectors_decision(backtest)
    if decision is None:
        state = backtest.status if backtest.status != BacktestStatus.ERROR else f"error: {backtest.error}"
        lines += [f"### ⏳ Backtest #{backtest.pk} {_cell(state)} — {head}", "", f"[Backtest #{backtest.pk}]({page})"]
        return "\n".join(lines) + "\n"
    verdict = "✅ passed" if decision.passed else "❌ failed"
    lines += [
        f"### {verdict}: backtest #{backtest.pk} — {head}",
        "",
        f"{standards.standard_sentence(backtest)} {len(backtest.task_ids)} tasks, condition {backtest.condition}, "
        f"engine `{backtest.engine_version}`.",
        "",
        "| Gate | Metric | Result | Δ mean | 95 % interval | Reason |",
        "|---|---|---|---:|---|---|",
    ]
    for gate in decision.gate_results:
        result = (
            "pass" if gate["passed"] else ("**regress**" if _adverse(gate["metric"], gate["delta"]) else "**fail**")
        )
        lines.append(
            f"| {gate['gate']} | `{gate['metric']}` | {result} | {gate_rules.signed(gate['delta'])} | "
            f"{_interval(gate)} | {_cell(gate['reason'])} |"
        )
    lines += ["", *_tasks(backtest, decision, site), *_codes(backtest), *_tokens(decision)]
    lines += ["", f"[Backtest #{backtest.pk}]({page}) · [per-task trace diffs]({page}#task-rows)"]
    return "\n".join(lines) + "\n"


def selectors_decision(backtest: Backtest):
    return selectors.backtest_decision(backtest) if backtest.status == BacktestStatus.FINISHED else None


def _adverse(metric: str, delta: float) -> bool:
    """Whether `delta` moved `metric` the wrong way (a held primary that had to rise is a fail, not a regress)."""
    if metric in card.HIGHER_IS_BETTER:
        return delta < -gate_rules.EPSILON
    return delta > gate_rules.EPSILON  # leakage, harmful admission, redundancy, tokens: lower is better


def _tasks(backtest: Backtest, decision, site: str) -> list[str]:
    """Each task on which a gated metric moved, the ones made worse first, with its trace diff."""
    traces: dict[tuple[int, str], int] = {
        (task_id, side): trace_id
        for task_id, side, trace_id in TaskReplay.objects.filter(backtest=backtest).values_list(
            "task_id", "side", "trace_id"
        )
    }
    for task_id, (trace_id, _metrics) in (standards.reference_replays(backtest) or {}).items():
        traces[(task_id, ReplaySide.BASELINE)] = trace_id
    moved = []
    for row in decision.per_task_deltas:
        # the gated metrics (the rows hold those only); tokens have their own line
        changes = [(m, d) for m, d in row["delta"].items() if m != "tokens" and abs(d) > gate_rules.EPSILON]
        if changes:
            worse = sum(_adverse(m, d) for m, d in changes)
            moved.append((-worse, row, changes))
    if not moved:
        return ["**Tasks that flipped:** none — no gated metric moved on any task.", ""]
    moved.sort(key=lambda item: item[0])
    diff = f"{site}{reverse('trace-diff')}"
    lines = [f"**Tasks that flipped** ({len(moved)} of {len(decision.per_task_deltas)}):", ""]
    for _worse, row, changes in moved[:MAX_TASKS]:
        a, b = traces.get((row["task_id"], ReplaySide.BASELINE)), traces.get((row["task_id"], ReplaySide.CANDIDATE))
        link = f" — [trace diff]({diff}?a={a}&b={b})" if a and b else ""
        said = "; ".join(
            f"`{m}` {gate_rules.fmt(row['baseline'][m])} → {gate_rules.fmt(row['candidate'][m])} "
            f"({'regressed' if _adverse(m, d) else 'improved'})"
            for m, d in changes
        )
        lines.append(f"- `{row['task']}`: {said}{link}")
    if len(moved) > MAX_TASKS:
        lines.append(f"- … and {len(moved) - MAX_TASKS} more on the backtest page")
    return [*lines, ""]


def _codes(backtest: Backtest) -> list[str]:
    sides: dict[str, list[int]] = {ReplaySide.BASELINE: [], ReplaySide.CANDIDATE: []}
    for side, trace_id in TaskReplay.objects.filter(backtest=backtest).values_list("side", "trace_id"):
        sides.setdefault(side, []).append(trace_id)
    before, after = _reason_counts(sides[ReplaySide.BASELINE]), _reason_counts(sides[ReplaySide.CANDIDATE])
    changed = sorted(code for code in set(before) | set(after) if before[code] != after[code])
    if not changed:
        return ["**Reason codes:** no count changed.", ""]
    lines = ["**Reason codes that changed** (candidates over every task):", "", "| Code | Before | After | Δ |"]
    lines.append("|---|---:|---:|---:|")
    for code in changed:
        change = after[code] - before[code]
        lines.append(f"| `{code}` | {before[code]} | {after[code]} | {'+' if change > 0 else '−'}{abs(change)} |")
    return [*lines, ""]


def _tokens(decision) -> list[str]:
    base, cand = decision.baseline_means.get("tokens"), decision.candidate_means.get("tokens")
    if base is None or cand is None:
        return []
    change = cand - base
    return [f"**Tokens:** {base:.1f} → {cand:.1f} per task ({'+' if change >= 0 else '−'}{abs(change):.1f})."]
