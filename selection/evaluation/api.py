"""The API's evaluation routes: a corpus's evaluations, running one, one evaluation, a job's progress.

Routes parse, call the one selector or service the pages call, and shape the answer; role checks
happen in those selectors and services.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import Http404, HttpResponse
from django.urls import reverse
from ninja import Field, Router, Schema, Status

from authority.ratelimits import rate_limit
from selection.api_fields import Id, Text
from selection.evaluation import jobs
from selection.evaluation.report import corpus_evaluations, corpus_for_name, evaluation_for_pk, evaluation_task_sets
from selection.memory import selectors
from selection.models import Corpus, Evaluation, Job

router = Router(tags=["selection"])


class EvaluationIn(Schema):
    conditions: list[Text] = Field(default_factory=list, max_length=16, description="empty: the whole ladder")


class EvaluationOut(Schema):
    id: int
    url: str
    page_url: str
    corpus: str
    created_at: datetime
    engine_version: str
    conditions: list[str]
    task_sets: dict[str, int] = Field(
        description="project slug -> the version of its task set the evaluation ran on (empty: run before versions)"
    )
    result: dict[str, Any] = Field(description="the `evaluate --json` document")


class EvaluationSummaryOut(Schema):
    id: int
    url: str
    created_at: datetime
    engine_version: str
    conditions: list[str]
    runs: int
    task_sets: dict[str, int] = Field(
        description="project slug -> the version of its task set the evaluation ran on (empty: run before versions)"
    )


class JobOut(Schema):
    id: int
    url: str
    page_url: str
    kind: str = Field(description="evaluation | import")
    status: str = Field(description="queued | running | finished | error")
    step: str
    done: int
    total: int
    corpus: str | None
    result: dict[str, Any] = Field(description="evaluation: its id; import: the corpus and its counts")
    result_url: str | None = Field(description="the evaluation (API), or the imported corpus's evaluations")
    error: str
    issues: list[str] = Field(description="every corpus issue, when an import was refused")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


def _corpus(name: str) -> Corpus:
    try:
        return corpus_for_name(name=name)
    except Corpus.DoesNotExist:
        raise Http404(f'no corpus "{name}"') from None


def job_document(job: Job) -> dict:
    result_url = None
    if job.status == "finished" and job.result.get("evaluation"):
        result_url = reverse("api-1:evaluation", args=[job.result["evaluation"]])
    elif job.status == "finished" and job.result.get("corpus"):
        result_url = reverse("api-1:corpus-evaluations", args=[job.result["corpus"]])
    return {
        "id": job.pk,
        "url": reverse("api-1:job", args=[job.pk]),
        "page_url": reverse("job-detail", args=[job.pk]),
        "kind": job.kind,
        "status": job.status,
        "step": job.step,
        "done": job.done,
        "total": job.total,
        "corpus": job.corpus.name if job.corpus_id else None,
        "result": job.result,
        "result_url": result_url,
        "error": job.error,
        "issues": list(job.issues),
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }


def job_accepted(response: HttpResponse, job: Job) -> Status:
    doc = job_document(job)
    response["Location"] = doc["url"]
    return Status(202, doc)


@router.get(
    "/corpora/{name}/evaluations",
    operation_id="selection_api_evaluation_list",
    response=list[EvaluationSummaryOut],
    url_name="corpus-evaluations",
    summary="A corpus's evaluations",
)
def evaluation_list(request, name: Text):
    corpus = _corpus(name)
    selectors.readable_corpus(user=request.auth, corpus=corpus)
    return [
        {
            "id": e.pk,
            "url": reverse("api-1:evaluation", args=[e.pk]),
            "created_at": e.created_at,
            "engine_version": e.engine_version,
            "conditions": list(e.conditions),
            "runs": e.run_count,
            "task_sets": evaluation_task_sets(e),
        }
        for e in corpus_evaluations(corpus=corpus)
    ]


@router.post(
    "/corpora/{name}/evaluations",
    operation_id="selection_api_evaluation_create",
    response={202: JobOut},
    url_name="evaluation-create",
    summary="Run an evaluation of a corpus",
    throttle=rate_limit("evaluation"),
)
def evaluation_create(request, response: HttpResponse, name: Text, body: EvaluationIn):
    """Queued for a worker (a lead of one of the corpus's projects); follow the job to its result."""
    corpus = _corpus(name)
    job = jobs.evaluation_enqueue(corpus=corpus, conditions=body.conditions, actor=request.auth)
    return job_accepted(response, job)


@router.get(
    "/jobs/{job_id}",
    operation_id="selection_api_job_detail",
    response=JobOut,
    url_name="job",
    summary="An evaluation or import job",
)
def job_detail(request, job_id: Id):
    """Progress while it runs; then the result's URL, or the error with every issue."""
    return job_document(jobs.readable_job(user=request.auth, pk=job_id))


@router.get(
    "/evaluations/{evaluation_id}",
    operation_id="selection_api_evaluation_detail",
    response=EvaluationOut,
    url_name="evaluation",
    summary="One evaluation",
)
def evaluation_detail(request, evaluation_id: Id):
    try:
        evaluation = evaluation_for_pk(pk=evaluation_id)
    except Evaluation.DoesNotExist:
        raise Http404(f"no evaluation {evaluation_id}") from None
    selectors.readable_corpus(user=request.auth, corpus=evaluation.corpus)
    return _evaluation(evaluation, evaluation.corpus)


def _evaluation(evaluation: Evaluation, corpus: Corpus) -> dict:
    return {
        "id": evaluation.pk,
        "url": reverse("api-1:evaluation", args=[evaluation.pk]),
        "page_url": reverse("evaluation-detail", args=[evaluation.pk]),
        "corpus": corpus.name,
        "created_at": evaluation.created_at,
        "engine_version": evaluation.engine_version,
        "conditions": list(evaluation.conditions),
        "task_sets": evaluation.result.get("task_sets", {}),
        "result": evaluation.result,
    }
