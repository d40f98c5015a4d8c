"""Evaluation pages: a corpus's evaluations, running one (leads), and one evaluation's ladder.

Views parse, check access through authority.access, call one service or read, and render.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from authority import access
from selection.evaluation.jobs import evaluation_enqueue
from selection.evaluation.ladder import ALL_CONDITIONS, EvaluationError
from selection.evaluation.report import (
    corpus_evaluations,
    corpus_for_name,
    evaluation_for_pk,
    evaluation_report,
    evaluation_task_sets,
    task_sets_differ,
    task_sets_text,
)
from selection.models import Corpus, Evaluation, Project


def _corpus(name: str) -> Corpus:
    try:
        return corpus_for_name(name=name)
    except Corpus.DoesNotExist:
        raise Http404(f'no corpus "{name}"') from None


@login_required
def evaluation_list(request, name: str):
    corpus = _corpus(name)
    caps = access.access_corpus_read(request.user, corpus)
    evaluations = list(corpus_evaluations(corpus=corpus))
    return render(
        request,
        "selection/evaluation_list.html",
        {
            "corpus": corpus,
            "evaluations": [(e, task_sets_text(evaluation_task_sets(e))) for e in evaluations],
            # a list of evaluations on different task sets says so: their numbers compare across a change
            "task_sets_differ": task_sets_differ(evaluations),
            "caps": caps,
            "all_conditions": ALL_CONDITIONS,
        },
    )


@login_required
@require_POST
def evaluation_create(request, name: str):
    corpus = _corpus(name)
    chosen = [c for c in request.POST.getlist("conditions") if c]
    try:
        # on a worker, as from the API: the job page shows its progress, then links the result
        job = evaluation_enqueue(corpus=corpus, conditions=chosen or None, actor=request.user)
    except EvaluationError as error:
        messages.error(request, str(error))
        return redirect("evaluation-list", name=corpus.name)
    messages.success(request, f"Evaluation queued as job #{job.pk}.")
    return redirect("job-detail", pk=job.pk)


@login_required
def evaluation_detail(request, pk: int):
    try:
        evaluation = evaluation_for_pk(pk=pk)
    except Evaluation.DoesNotExist:
        raise Http404(f"no evaluation {pk}") from None
    caps = access.access_corpus_read(request.user, evaluation.corpus)
    report = evaluation_report(evaluation=evaluation)
    return render(
        request,
        "selection/evaluation_detail.html",
        {
            "evaluation": evaluation,
            "corpus": evaluation.corpus,
            "report": report,
            "charts": list(report.charts),
            "caps": caps,
        },
    )


@login_required
def evaluation_index(request):
    """The top navigation's "Evaluations": straight to the corpus when the user reads just one."""
    projects = access.readable_projects(request.user, Project.objects.all())
    corpora = list(Corpus.objects.filter(projects__in=projects).distinct().order_by("name"))
    if len(corpora) == 1:
        return redirect("evaluation-list", name=corpora[0].name)
    return render(request, "selection/evaluation_index.html", {"corpora": corpora})
