"""A backtest's end: every replay judged against the gates (the decision), or the run failed.

A replay that keeps killing its worker fails its backtest instead of being delivered forever.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from authority.audit import audit_record
from rules import ablation as ablation_rules
from rules import gate_verdict as gate_rules
from selection.models import Task

from .errors import BacktestError
from .lifecycle import backtest_changed
from .models import (
    AblationReplay,
    Backtest,
    BacktestDecision,
    BacktestStatus,
    ReplaySide,
    ShadowReplay,
    TaskReplay,
)
from .review import standards

logger = logging.getLogger(__name__)

# --- finish or fail --------------------------------------------------------------------------


def _summary(decision: gate_rules.Decision) -> str:
    verdict = "passed" if decision.passed else "failed"
    primary = decision.primary
    head = (
        f"{verdict}: {primary.metric} {gate_rules.signed(primary.delta)} "
        f"({gate_rules.fmt(primary.baseline)} → {gate_rules.fmt(primary.candidate)})"
    )
    breached = [g.reason for g in decision.gates[1:] if not g.passed]
    return "; ".join([head, *breached])


def backtest_finish(*, backtest_id: int) -> BacktestDecision:
    """Judge every replay against the gates: the decision, the backtest finished, the audit row.

    Running it again returns the stored decision and writes nothing.
    """
    with transaction.atomic():
        backtest = (
            Backtest.objects.select_for_update(of=("self",))
            .select_related("proposal", "proposal__project", "baseline_version", "candidate_version")
            .get(pk=backtest_id)
        )
        if backtest.status == BacktestStatus.FINISHED:
            return BacktestDecision.objects.get(backtest=backtest)
        if backtest.status == BacktestStatus.ERROR:
            raise BacktestError(f"backtest #{backtest_id} ended in error: {backtest.error}")
        uids = dict(Task.objects.filter(pk__in=backtest.task_ids).values_list("id", "uid"))
        sides: dict[str, dict[int, dict]] = {ReplaySide.BASELINE: {}, ReplaySide.CANDIDATE: {}}
        for task_id, side, metrics in TaskReplay.objects.filter(backtest=backtest).values_list(
            "task_id", "side", "metrics"
        ):
            sides[side][task_id] = metrics
        missing = [f"{uids.get(t, t)} ({side})" for t in backtest.task_ids for side in sides if t not in sides[side]]
        if missing:
            raise BacktestError(f"backtest #{backtest_id} lacks {len(missing)} replays: {', '.join(missing[:5])}")
        order = [(t, uids[t]) for t in backtest.task_ids]
        # a rollback is judged against the restored version's own recorded replays, when there are
        reference = standards.reference_replays(backtest)
        judged = {t: m for t, (_trace, m) in reference.items()} if reference else sides[ReplaySide.BASELINE]
        decision = gate_rules.decide(
            gate_rules.Gates.from_spec(backtest.gates),
            {uid: judged[t] for t, uid in order},
            {uid: sides[ReplaySide.CANDIDATE][t] for t, uid in order},
            standard=standards.judging_standard(backtest, used_reference=reference is not None),
        )
        effects = _ablation_effects(backtest, order, sides)
        shadowed = set(ShadowReplay.objects.filter(backtest=backtest).values_list("selection_id", flat=True))
        unshadowed = [t for t in (backtest.shadow or {}).get("traces", []) if t not in shadowed]
        if unshadowed:
            raise BacktestError(
                f"backtest #{backtest_id} lacks the shadow replay of {len(unshadowed)} selections: "
                + ", ".join(f"trace {t}" for t in unshadowed[:5])
            )
        per_task = [{"task_id": t, **row.as_dict()} for (t, _uid), row in zip(order, decision.per_task, strict=True)]
        row = BacktestDecision.objects.create(
            backtest=backtest,
            passed=decision.passed,
            primary_metric=decision.primary_metric,
            baseline_means=decision.baseline_means,
            candidate_means=decision.candidate_means,
            gate_results=[g.as_dict() for g in decision.gates],
            per_task_deltas=per_task,
            ablation=[e.as_dict() for e in effects],
        )
        backtest.status = BacktestStatus.FINISHED
        backtest.finished_at = timezone.now()
        backtest.save(update_fields=["status", "finished_at"])
        proposal = backtest.proposal
        audit_record(
            actor=None,
            project=proposal.project,
            action="backtest.finished",
            obj=backtest,
            summary=f"backtest #{backtest.pk} of proposal #{proposal.pk} {_summary(decision)}",
            payload={
                "proposal": proposal.pk,
                "passed": decision.passed,
                "baseline_version": backtest.baseline_version.number,
                "candidate_version": backtest.candidate_version.number,
                "gates": row.gate_results,
                "flagged_parts": [e.part for e in effects if e.flagged],
            },
        )
        backtest_changed.send(sender=Backtest, backtest=backtest)
    return row


def _ablation_effects(backtest: Backtest, order, sides) -> list[ablation_rules.PartEffect]:
    """Each part's effect from the variants' replays (none without an ablation plan)."""
    ablation = backtest.ablation or {}
    variants = ablation.get("variants") or []
    if not variants:
        return []
    found: dict[int, dict[int, dict]] = {i: {} for i in range(len(variants))}
    for task_id, variant, metrics in AblationReplay.objects.filter(backtest=backtest).values_list(
        "task_id", "variant", "metrics"
    ):
        found[variant][task_id] = metrics
    missing = [f"{uid} (variant {i})" for i in found for t, uid in order if t not in found[i]]
    if missing:
        raise BacktestError(
            f"backtest #{backtest.pk} lacks {len(missing)} ablation replays: {', '.join(missing[:5])}"
        )
    chosen = ablation_rules.plan(ablation["parts"])
    if [list(v) for v in chosen.variants] != variants:
        raise BacktestError(f"backtest #{backtest.pk}: its ablation variants do not follow its parts")
    return ablation_rules.ablate(
        backtest.gates,
        chosen,
        {uid: sides[ReplaySide.BASELINE][t] for t, uid in order},
        {uid: sides[ReplaySide.CANDIDATE][t] for t, uid in order},
        {i: {uid: found[i][t] for t, uid in order} for i in found},
    )


def backtest_fail(*, backtest_id: int, error: str) -> Backtest:
    """Mark a backtest that cannot finish as errored (its proposal waits for another run)."""
    with transaction.atomic():
        backtest = (
            Backtest.objects.select_for_update(of=("self",))
            .select_related("proposal", "proposal__project")
            .get(pk=backtest_id)
        )
        if backtest.status in (BacktestStatus.FINISHED, BacktestStatus.ERROR):
            return backtest
        backtest.status = BacktestStatus.ERROR
        backtest.error = error[:2000]
        backtest.finished_at = timezone.now()
        backtest.save(update_fields=["status", "error", "finished_at"])
        proposal = backtest.proposal
        audit_record(
            actor=None,
            project=proposal.project,
            action="backtest.failed",
            obj=backtest,
            summary=f"backtest #{backtest.pk} of proposal #{proposal.pk} failed: {backtest.error}",
            payload={"proposal": proposal.pk, "error": backtest.error},
        )
        backtest_changed.send(sender=Backtest, backtest=backtest)
    return backtest


# --- jobs that cannot hang -------------------------------------------------------------------

MAX_REPLAY_DELIVERIES = 3  # deliveries of one replay that died with its worker, retries aside


def _delivery_counted(app, key: str) -> int | None:
    """This delivery counted under `key` in the result backend; None without a backend client."""
    client = getattr(app.backend, "client", None)
    if client is None:  # a backend without a client (tests' eager mode): nothing to count with
        return None
    deliveries = client.incr(key)
    client.expire(key, 24 * 3600)
    return deliveries


def _deliveries_exceeded(backtest_id: int, what: str, deliveries: int) -> bool:
    backtest_fail(
        backtest_id=backtest_id,
        error=(
            f"{what} was delivered {deliveries - 1} times and its "
            "worker died each time: the backtest stopped instead of retrying it forever"
        ),
    )
    return False


def _task_label(task_id: int) -> str:
    return str(Task.objects.filter(pk=task_id).values_list("uid", flat=True).first() or task_id)


def replay_delivery_allowed(app, *, backtest_id: int, task_id: int, side: str, retries: int) -> bool:
    """Count this delivery of one replay; past MAX_REPLAY_DELIVERIES the backtest fails instead.

    With acks_late and reject_on_worker_lost, a replay that crashes its worker (out of memory, a
    segfault, SIGKILL) is delivered again; the count lives in the result backend (redis) because
    the crash leaves no chance to write anything else. Retries of one delivery do not count.
    """
    deliveries = _delivery_counted(app, f"fg:replay-deliveries:{backtest_id}:{task_id}:{side}:{retries}")
    if deliveries is None or deliveries <= MAX_REPLAY_DELIVERIES:
        return True
    if side == "shadow":  # a shadow replay's "task" is the recorded selection's trace
        what = f"the shadow replay of trace {task_id}"
    else:
        what = f"the replay of task {_task_label(task_id)} ({side})"
    return _deliveries_exceeded(backtest_id, what, deliveries)


def chunk_delivery_allowed(app, *, backtest_id: int, pairs, retries: int) -> bool:
    """replay_delivery_allowed for a chunk of (task, side) pairs (a backtest's chunks never share
    a pair, so the first pair and the length name it)."""
    if not pairs:
        return True
    (task_id, side), count = pairs[0], len(pairs)
    key = f"fg:replay-deliveries:{backtest_id}:chunk:{task_id}:{side}:{count}:{retries}"
    deliveries = _delivery_counted(app, key)
    if deliveries is None or deliveries <= MAX_REPLAY_DELIVERIES:
        return True
    what = f"the chunk of {count} replays from task {_task_label(task_id)} ({side})"
    return _deliveries_exceeded(backtest_id, what, deliveries)
