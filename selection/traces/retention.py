"""Retention: how many days a project's traces keep their payload, by origin; then they become tombstones.

The policy is a project setting that only a lead changes (`retention_policy_set`, audited), not a
frame field: it changes no selection, so a backtest and four-eyes review would judge nothing.
`retention_apply` (the `apply_retention` command and the daily Celery beat task) turns each trace
older than its origin's limit into a tombstone through selection.traces.chain.trace_tombstone: query,
header, bundle, admitted list and candidate rows go; ids, digests, the chain link and the facts of
the selection (project, task, condition, source, versions, bundle digest) stay, and verify_traces
still passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from celery import shared_task
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from authority import access
from authority.audit import audit_record
from selection.models import Project, RetentionOrigin, RetentionPolicy, TombstoneKind, Trace
from selection.traces.chain import EXPIRED_PAYLOAD, trace_tombstone

MAX_RETENTION_DAYS = 36_500  # a hundred years; leave a field empty to keep for ever
ORIGIN_SOURCES = {RetentionOrigin.EVALUATION: ("evaluation",), RetentionOrigin.BACKTEST: ("backtest",)}
EXPIRE_BATCH = 200  # traces tombstoned per transaction


class RetentionRefused(ValueError):
    """A policy value outside what can be kept (the message names the field)."""


def origin_q(origin: str) -> Q:
    """Traces of one origin: evaluation, backtest, or live (every other source: select, api, mcp, replay)."""
    if origin == RetentionOrigin.LIVE:
        return ~Q(source__in=[s for sources in ORIGIN_SOURCES.values() for s in sources])
    return Q(source__in=ORIGIN_SOURCES[RetentionOrigin(origin)])


def retention_policy(*, project: Project) -> RetentionPolicy | None:
    return RetentionPolicy.objects.filter(project=project).first()


def _days(name: str, value) -> int | None:
    if value is None or value == "":
        return None
    try:
        days = int(value)
    except (TypeError, ValueError):
        raise RetentionRefused(f"{name}: a whole number of days, or empty to keep for ever, not {value!r}") from None
    if not 1 <= days <= MAX_RETENTION_DAYS:
        raise RetentionRefused(f"{name}: from 1 to {MAX_RETENTION_DAYS} days, not {days}")
    return days


def retention_policy_set(
    *, project: Project, lead, evaluation_days=None, backtest_days=None, live_days=None
) -> RetentionPolicy:
    """Set the project's retention (days per origin; None keeps for ever); a lead only, audited."""
    access.access_retention(lead, project)
    days = {
        "evaluation_days": _days("evaluation_days", evaluation_days),
        "backtest_days": _days("backtest_days", backtest_days),
        "live_days": _days("live_days", live_days),
    }
    with transaction.atomic():
        policy, _ = RetentionPolicy.objects.select_for_update().get_or_create(project=project)
        before = {name: getattr(policy, name) for name in days}
        for name, value in days.items():
            setattr(policy, name, value)
        policy.updated_by = lead
        policy.save()
        audit_record(
            actor=lead,
            project=project,
            action="retention.set",
            obj=policy,
            summary=", ".join(f"{n.removesuffix('_days')}: {_kept(v)}" for n, v in days.items()),
            payload={"before": before, "after": days},
        )
    return policy


def _kept(days: int | None) -> str:
    return "for ever" if days is None else f"{days} days"


@dataclass
class RetentionReport:
    project: str
    dry_run: bool
    expired: dict[str, list[int]] = field(default_factory=dict)  # origin -> trace ids

    @property
    def total(self) -> int:
        return sum(len(ids) for ids in self.expired.values())

    def __str__(self) -> str:
        verb = "would expire" if self.dry_run else "expired"
        parts = ", ".join(f"{len(ids)} {origin}" for origin, ids in self.expired.items()) or "nothing"
        return f"{self.project}: {verb} {parts}"


def expiring_traces(policy: RetentionPolicy, *, now: datetime) -> dict[str, list[int]]:
    """origin -> ids of the project's traces past that origin's limit and not yet expired."""
    out: dict[str, list[int]] = {}
    for origin, days in policy.days().items():
        if days is None:
            continue
        out[str(origin)] = list(
            Trace.objects.filter(origin_q(origin), project_id=policy.project_id, expired_at__isnull=True)
            .filter(created_at__lt=now - timedelta(days=days))
            .order_by("chain_position", "id")
            .values_list("pk", flat=True)
        )
    return out


def retention_apply(*, project: Project | None = None, dry_run: bool = False, now: datetime | None = None, actor=None):
    """Expire every trace past its project's retention (one project, or all with a policy).

    Run by `apply_retention` and the daily beat task (actor None: the system). Each batch and its
    audit row share a transaction; `dry_run` counts and writes nothing.
    """
    now = now or timezone.now()
    policies = RetentionPolicy.objects.select_related("project").order_by("project__slug")
    if project is not None:
        policies = policies.filter(project=project)
    reports = []
    for policy in policies:
        report = RetentionReport(policy.project.slug, dry_run, expiring_traces(policy, now=now))
        reports.append(report)
        if dry_run:
            continue
        days = policy.days()
        for origin, ids in report.expired.items():
            reason = f"retention: {origin} traces of {policy.project.slug} keep their payload {days[origin]} days"
            for start in range(0, len(ids), EXPIRE_BATCH):
                batch = ids[start : start + EXPIRE_BATCH]
                with transaction.atomic():
                    for trace_id in batch:
                        trace_tombstone(
                            trace_id,
                            kind=TombstoneKind.EXPIRED,
                            changes=EXPIRED_PAYLOAD,
                            drop_candidates=True,
                            actor=actor,
                            reason=reason,
                        )
                    audit_record(
                        actor=actor,
                        project=policy.project,
                        action="retention.expired",
                        obj=policy,
                        summary=f"{len(batch)} {origin} trace{'s' if len(batch) != 1 else ''} expired ({reason})",
                        payload={"origin": origin, "days": days[origin], "traces": batch},
                    )
    return reports


@shared_task(name="selection.apply_retention")
def apply_retention(as_of: str | None = None) -> int:
    """The daily beat task (settings.CELERY_BEAT_SCHEDULE): expire traces past their retention.
    `as_of` (ISO date-time) replaces now, for a rehearsal; returns how many traces expired."""
    now = datetime.fromisoformat(as_of) if as_of else None
    return sum(report.total for report in retention_apply(now=now))
