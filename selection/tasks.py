"""Celery tasks of the selection app: thin, they take a job id and call jobs.job_run."""

from __future__ import annotations

from datetime import datetime

from celery import shared_task

from selection.evaluation import jobs
from selection.traces import retention


@shared_task(name="selection.run_job", acks_late=True)
def run_job(job_id: int) -> str:
    return jobs.job_run(job_id).status


@shared_task(name="selection.apply_retention")
def apply_retention(as_of: str | None = None) -> int:
    """The daily beat task (settings.CELERY_BEAT_SCHEDULE): expire traces past their retention.
    `as_of` (ISO date-time) replaces now, for a rehearsal; returns how many traces expired."""
    now = datetime.fromisoformat(as_of) if as_of else None
    return sum(report.total for report in retention.retention_apply(now=now))
