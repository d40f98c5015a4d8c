"""The API's corpus routes: the corpora a user may read, and a corpus archive's import (a job)."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpResponse
from django.urls import reverse
from ninja import File, Router, Schema
from ninja.files import UploadedFile

from authority.ratelimits import rate_limit
from selection.evaluation import jobs
from selection.evaluation.api import JobOut, job_accepted
from selection.memory import selectors

router = Router(tags=["selection"])


class CorpusOut(Schema):
    name: str
    description: str
    standpoint: datetime | None
    imported_at: datetime
    projects: list[str]
    evaluations_url: str


@router.get(
    "/corpora",
    operation_id="selection_api_corpus_list",
    response=list[CorpusOut],
    url_name="corpora",
    summary="The corpora you may read",
)
def corpus_list(request):
    return [
        {
            "name": corpus.name,
            "description": corpus.description,
            "standpoint": corpus.standpoint,
            "imported_at": corpus.imported_at,
            "projects": [p.slug for p in corpus.projects.all()],
            "evaluations_url": reverse("evaluation-list", args=[corpus.name]),
        }
        for corpus in selectors.readable_corpora(user=request.auth)
    ]


@router.post(
    "/corpora",
    operation_id="selection_api_corpus_upload",
    response={202: JobOut},
    url_name="corpus-import",
    summary="Import a corpus archive",
    throttle=rate_limit("upload"),
)
def corpus_upload(request, response: HttpResponse, archive: File[UploadedFile]):
    """A .tar.gz or .zip of a corpus in the interchange format (superusers). It is checked in full
    now (422 lists every issue, 413 past a limit); the import then runs on a worker: follow the job."""
    return job_accepted(response, jobs.corpus_import_enqueue(user=request.auth, upload=archive))
