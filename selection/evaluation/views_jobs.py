"""Job pages: one evaluation or import job's progress and result, and the corpus upload form.

The job page refreshes itself while the job runs; the upload form posts to the same service as
POST /api/v1/corpora (check the archive in full now, import on a worker).
"""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from authority import access
from selection.corpus import CorpusError
from selection.evaluation.jobs import corpus_import_enqueue, readable_job
from selection.memory.uploads import ArchiveRefused
from selection.models import JobStatus

REFRESH_SECONDS = 2


@login_required
def job_detail(request, pk: int):
    job = readable_job(user=request.user, pk=pk)
    running = job.status in (JobStatus.QUEUED, JobStatus.RUNNING)
    return render(
        request,
        "selection/job_detail.html",
        {
            "job": job,
            "running": running,
            "refresh": REFRESH_SECONDS if running else None,
            "percent": int(100 * job.done / job.total) if job.total else (0 if running else 100),
        },
    )


class UploadForm(forms.Form):
    archive = forms.FileField(help_text="a .tar.gz or .zip of a corpus in the interchange format")


@login_required
@require_http_methods(["GET", "POST"])
def corpus_upload(request):
    access.access_corpus_import(request.user)
    form = UploadForm(request.POST or None, request.FILES or None)
    issues: list[str] = []
    if request.method == "POST" and form.is_valid():
        try:
            job = corpus_import_enqueue(user=request.user, upload=form.cleaned_data["archive"])
        except ArchiveRefused as error:
            form.add_error("archive", str(error))
        except CorpusError as error:
            form.add_error("archive", error.summary)
            issues = [str(issue) for issue in error.issues]
        else:
            return redirect("job-detail", pk=job.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "selection/corpus_upload.html", {"form": form, "issues": issues}, status=status)
