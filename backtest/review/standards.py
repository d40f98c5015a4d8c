"""The standard a backtest holds its proposal to, chosen when it starts, and what it judges against.

The frame in force declares a standard per kind of change (gates.held_to: superiority,
non_inferiority, review_only; selection.corpus.frames.gate_standards). A change that touches no
selection input is neutral (rules.gate_verdict.change_kind). A rollback to a version that was
itself promoted is judged against that version's own recorded replays: the latest finished
backtest that replayed it (as its candidate, or as the baseline a later change was judged
against) over the same tasks; without one, against the current version, and it says so.
"""

from __future__ import annotations

from django.db.models import Q

from authority.models import Promotion
from rules import gate_verdict as gate_rules
from selection.corpus.gate_standards import gate_standards

from ..models import Backtest, BacktestStatus, ReplaySide, TaskReplay


def _recorded(version_id: int, task_ids: list[int]) -> tuple[Backtest, str] | None:
    """The newest finished backtest that replayed `version_id` over exactly these tasks, and the side."""
    wanted = sorted(task_ids)
    for backtest in Backtest.objects.filter(
        Q(candidate_version_id=version_id) | Q(baseline_version_id=version_id),
        status=BacktestStatus.FINISHED,
        decision__isnull=False,
    ).order_by("-finished_at", "-id"):
        if sorted(backtest.task_ids) == wanted:
            side = ReplaySide.CANDIDATE if backtest.candidate_version_id == version_id else ReplaySide.BASELINE
            return backtest, side
    return None


def standard_for(*, proposal, baseline, task_ids: list[int]) -> dict:
    """The `standard` entry of a new backtest's gates: name, margin, the kind of change, the keys it
    touches, and for a rollback the reference replays it is judged against (None: the baseline)."""
    declared = gate_standards(baseline.snapshot.get("gates"))
    kind, keys = gate_rules.change_kind(proposal.kind, baseline.snapshot, proposal.frame_version.snapshot)
    restores = proposal.restores if kind == "rollback" else None
    if restores is not None and not Promotion.objects.filter(frame_version=restores).exists():
        kind = "change"  # "back" to a version never in force: held to what any change is held to
        restores = None
    name = declared.standard(kind)
    entry = {"name": name, "margin": declared.margin, "kind": kind, "keys": list(keys), "reference": None}
    if restores is not None and name == "non_inferiority":
        found = _recorded(restores.pk, task_ids)
        if found is not None:
            backtest, side = found
            entry["reference"] = {"backtest": backtest.pk, "side": side, "version": restores.number}
        entry["restores"] = restores.number
    return entry


def standard_entry(backtest: Backtest) -> dict:
    return dict((backtest.gates or {}).get("standard") or {"name": "superiority", "kind": "change"})


def reference_replays(backtest: Backtest) -> dict[int, tuple[int, dict]] | None:
    """task id -> (trace id, metrics) of the replays this backtest is judged against instead of its
    baseline side, when its standard names recorded ones that cover every task; else None."""
    reference = standard_entry(backtest).get("reference")
    if not reference:
        return None
    rows = {
        task_id: (trace_id, metrics)
        for task_id, trace_id, metrics in TaskReplay.objects.filter(
            backtest_id=reference["backtest"], side=reference["side"]
        ).values_list("task_id", "trace_id", "metrics")
    }
    if any(t not in rows for t in backtest.task_ids):
        return None
    return {t: rows[t] for t in backtest.task_ids}


def against(backtest: Backtest, *, used_reference: bool) -> str:
    """What the candidate is judged against, in words (empty: the backtest's own baseline)."""
    entry = standard_entry(backtest)
    if entry.get("name") == "review_only":
        return ", ".join(entry.get("keys") or ()) or "nothing"
    reference = entry.get("reference")
    if used_reference and reference:
        return f"v{reference['version']}'s own recorded replays (backtest #{reference['backtest']})"
    if entry.get("restores") is not None and entry.get("name") == "non_inferiority":
        return (
            f"v{backtest.baseline_version.number}, the current version: v{entry['restores']} has no "
            "recorded backtest over these tasks"
        )
    return ""


def judging_standard(backtest: Backtest, *, used_reference: bool) -> gate_rules.Standard:
    entry = standard_entry(backtest)
    return gate_rules.Standard(
        name=entry.get("name") or "superiority",
        margin=float(entry.get("margin") or 0.0),
        against=against(backtest, used_reference=used_reference),
    )


def standard_sentence(backtest: Backtest) -> str:
    """One sentence for the pages: which standard, why, and against what."""
    entry = standard_entry(backtest)
    name, kind = entry.get("name") or "superiority", entry.get("kind") or "change"
    what = {"neutral": "a change that touches no selection input"}.get(kind, f"a {kind}")
    if name == "review_only":
        return f"Held to review only: {what} ({', '.join(entry.get('keys') or ())}); no gate decides it."
    if name == "non_inferiority":
        margin = float(entry.get("margin") or 0.0)
        allowed = f"by more than {margin:g}" if margin else "at all"
        judged = against(backtest, used_reference=reference_replays(backtest) is not None)
        tail = f", judged against {judged}" if judged else ""
        return (
            f"Held to non-inferiority as {what}: it may not fall {allowed} at the low end of its 95 % interval{tail}."
        )
    return f"Held to superiority as {what}: the primary metric must rise."
