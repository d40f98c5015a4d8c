"""Celery tasks of the selection app: thin, they take a job id and call jobs.job_run."""

from __future__ import annotations

from celery import shared_task

from . import jobs


@shared_task(name="selection.run_job", acks_late=True)
def run_job(job_id: int) -> str:
    return jobs.job_run(job_id).status
