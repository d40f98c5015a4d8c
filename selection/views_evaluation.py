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

from .evaluation import ALL_CONDITIONS, EvaluationError, evaluation_run
from .evaluation_report import (
    corpus_evaluations,
    corpus_for_name,
    evaluation_for_pk,
    evaluation_report,
)
from .models import Corpus, Evaluation


def _corpus(name: str) -> Corpus:
    try:
        return corpus_for_name(name=name)
    except Corpus.DoesNotExist:
        raise Http404(f'no corpus "{name}"') from None


@login_required
def evaluation_list(request, name: str):
    corpus = _corpus(name)
    caps = access.access_corpus_read(request.user, corpus)
    return render(
        request,
        "selection/evaluation_list.html",
        {
            "corpus": corpus,
            "evaluations": corpus_evaluations(corpus=corpus),
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
        # synchronous: a fixture-sized corpus evaluates in seconds once the index is built
        evaluation = evaluation_run(corpus=corpus, conditions=chosen or None, actor=request.user)
    except EvaluationError as error:
        messages.error(request, str(error))
        return redirect("evaluation-list", name=corpus.name)
    messages.success(request, f"Evaluation {evaluation.pk} stored.")
    return redirect("evaluation-detail", pk=evaluation.pk)


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
