"""Celery tasks of the selection app, gathered for autodiscovery; each lives beside its service."""

from selection.evaluation.jobs import run_job
from selection.traces.retention import apply_retention

__all__ = ["apply_retention", "run_job"]
