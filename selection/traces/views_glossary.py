"""The glossary page: every condition, reason code, routing code, E-code and term the pages show,
each with its one-line meaning; every code on every page links here."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from selection.engine.explain.glossary import ENTRIES, GROUPS, anchor


@login_required
def glossary(request):
    groups = [(key, title, [(anchor(e.key), e) for e in ENTRIES.values() if e.group == key]) for key, title in GROUPS]
    return render(request, "selection/glossary.html", {"groups": groups})
