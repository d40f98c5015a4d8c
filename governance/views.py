"""Dashboard pages of the governance app; views parse, call one selector or service, render."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from . import selectors


@login_required
def home(request):
    return render(request, "governance/home.html", {"projects": selectors.project_overview(user=request.user)})
