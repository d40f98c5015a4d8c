"""Long work on the workers: evaluations and corpus imports as Jobs, queued on commit, with progress.

Asking for one checks the role and the input in the request (so a refused or invalid request
writes nothing and says why at once); the worker then runs the one service every interface uses,
evaluation_run or corpus_import, writing its progress on the Job row as it goes.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from celery import shared_task
from django.db import transaction
from django.shortcuts import get_object_or_404
from django.utils import timezone

from authority import access
from selection.corpus import CorpusError
from selection.evaluation.ladder import EvaluationError, evaluation_run, parse_conditions
from selection.memory.importing import corpus_import
from selection.memory.uploads import corpus_upload_stage, staged_root
from selection.models import Corpus, Job, JobKind, JobStatus

logger = logging.getLogger(__name__)


def _queue(job: Job) -> None:
    job_id = job.pk
    transaction.on_commit(lambda: _launch(job_id))


def _launch(job_id: int) -> None:
    try:
        run_job.delay(job_id)
    except Exception as error:  # the broker is down or refused: say so on the job
        logger.exception("job #%s could not be queued", job_id)
        Job.objects.filter(pk=job_id).update(
            status=JobStatus.ERROR, error=f"could not queue the job: {error}", finished_at=timezone.now()
        )


def evaluation_enqueue(*, corpus: Corpus, conditions, actor) -> Job:
    """Queue an evaluation of `corpus` (a lead of one of its projects); EvaluationError at once for
    unknown conditions."""
    access.access_evaluate(actor, corpus)
    try:
        names = parse_conditions(conditions or None)
    except ValueError as error:
        raise EvaluationError(str(error)) from error
    with transaction.atomic():
        job = Job.objects.create(
            kind=JobKind.EVALUATION, corpus=corpus, requested_by=actor, params={"conditions": list(names)}
        )
        _queue(job)
    return job


def corpus_import_enqueue(*, user, upload) -> Job:
    """Check an uploaded archive in full now (ArchiveRefused, CorpusError), import it on a worker."""
    directory = corpus_upload_stage(user=user, upload=upload)
    with transaction.atomic():
        job = Job.objects.create(
            kind=JobKind.IMPORT,
            requested_by=user,
            params={"directory": str(directory), "archive": getattr(upload, "name", "") or ""},
        )
        _queue(job)
    return job


def job_run(job_id: int) -> Job:
    """Run a queued job to its end (the worker calls this); a job already started is left alone,
    so a redelivered message does not run it twice."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.status != JobStatus.QUEUED:
            return job
        job.status, job.started_at = JobStatus.RUNNING, timezone.now()
        job.save(update_fields=["status", "started_at"])
    try:
        result = _evaluate(job) if job.kind == JobKind.EVALUATION else _import(job)
    except CorpusError as error:
        _finish(job, status=JobStatus.ERROR, error=error.summary, issues=[str(i) for i in error.issues])
    except Exception as error:  # noqa: BLE001 - the job records why it failed; the worker goes on
        logger.exception("job #%s failed", job.pk)
        _finish(job, status=JobStatus.ERROR, error=str(error) or type(error).__name__)
    else:
        _finish(job, status=JobStatus.FINISHED, result=result)
    finally:
        if job.kind == JobKind.IMPORT and job.params.get("directory"):
            shutil.rmtree(staged_root(Path(job.params["directory"])), ignore_errors=True)
    return Job.objects.get(pk=job.pk)


@shared_task(name="selection.run_job", acks_late=True)
def run_job(job_id: int) -> str:
    """The worker's task: run one queued job (selection/tasks.py registers it)."""
    return job_run(job_id).status


def _progress(job: Job, step: str):
    def report(done: int, total: int) -> None:
        Job.objects.filter(pk=job.pk).update(step=step, done=done, total=total)

    return report


def _evaluate(job: Job) -> dict:
    evaluation = evaluation_run(
        corpus=job.corpus,
        conditions=job.params.get("conditions") or None,
        actor=job.requested_by,
        progress=_progress(job, "replaying"),
    )
    return {"evaluation": evaluation.pk}


def _import(job: Job) -> dict:
    counts: dict[str, int] = {}

    def report(step: str, advanced: int, total: int) -> None:
        counts[step] = counts.get(step, 0) + advanced
        Job.objects.filter(pk=job.pk).update(step=step, done=counts[step], total=total)

    corpus = corpus_import(job.params["directory"], progress=report, actor=job.requested_by)
    Job.objects.filter(pk=job.pk).update(corpus=corpus)
    return {
        "corpus": corpus.name,
        "projects": [p.slug for p in corpus.projects.order_by("position", "slug")],
        "units": corpus.units.count(),
        "tasks": corpus.tasks.count(),
    }


def _finish(job: Job, *, status: str, result: dict | None = None, error: str = "", issues=None) -> None:
    Job.objects.filter(pk=job.pk).update(
        status=status, result=result or {}, error=error, issues=issues or [], finished_at=timezone.now()
    )


def readable_job(*, user, pk: int) -> Job:
    """A job its reader may see: an evaluation's to whoever reads its corpus; an import's to whoever
    asked for it, and to superusers."""
    job = get_object_or_404(Job.objects.select_related("corpus", "requested_by"), pk=pk)
    if job.kind == JobKind.EVALUATION and job.corpus is not None:
        access.access_corpus_read(user, job.corpus)
    elif not (job.requested_by_id == getattr(user, "pk", None) or access.reads_all_projects(user)):
        raise access.AccessDenied("only whoever asked for an import, or a superuser, may follow it")
    return job
