"""The 500 page inside the site's navigation: Django's default renders it without the request."""

from __future__ import annotations

from django.http import HttpResponseServerError
from django.shortcuts import render
from django.template import loader


def server_error(request):
    try:
        # with the request the page shows the signed-in user's navigation
        return render(request, "500.html", status=500)
    except Exception:  # noqa: BLE001 - the database or the session may be what failed
        return HttpResponseServerError(loader.get_template("500.html").render({}))
