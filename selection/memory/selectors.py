"""Reads of memory: the corpora a user may read, a corpus's structural conflicts."""

from __future__ import annotations

from authority import access
from selection.engine.routing.route import structural_conflicts
from selection.memory import store
from selection.models import Corpus, Project


def readable_corpora(*, user):
    """Corpora with at least one project `user` may read, by name, their projects prefetched."""
    return (
        Corpus.objects.filter(projects__in=access.readable_projects(user, Project.objects.all()))
        .distinct()
        .order_by("name")
        .prefetch_related("projects")
    )


def readable_corpus(*, user, corpus) -> access.CorpusCapabilities:
    return access.access_corpus_read(user, corpus)


def corpus_conflicts(*, corpus_id: int):
    """Structural conflicts of a corpus: active units of one project sharing subject and facet
    with no supersession between them (reported on import; every selection that would load both
    reports them again)."""
    return structural_conflicts(store.corpus_index(corpus_id).units)
