"""Celery tasks of the selection app: thin, they take a job id and call jobs.job_run."""

from __future__ import annotations

from celery import shared_task

from . import jobs, retention


@shared_task(name="selection.run_job", acks_late=True)
def run_job(job_id: int) -> str:
    return jobs.job_run(job_id).status


@shared_task(name="selection.apply_retention")
def apply_retention() -> int:
    """The daily beat task (settings.CELERY_BEAT_SCHEDULE): expire traces past their retention."""
    return sum(report.total for report in retention.retention_apply())
