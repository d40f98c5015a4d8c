"""Error answers: the site's 500 page inside its navigation (Django's default renders it without
the request), and problem details (RFC 9457), the one shape of every error answer of the API."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.shortcuts import render
from django.template import loader


def server_error(request):
    try:
        # with the request the page shows the signed-in user's navigation
        return render(request, "500.html", status=500)
    except Exception:  # noqa: BLE001 - the database or the session may be what failed
        return HttpResponseServerError(loader.get_template("500.html").render({}))


PROBLEM_TYPE = "https://frame-governance.invalid/problems/"
PROBLEM_MEDIA_TYPE = "application/problem+json"


def problem(
    request: HttpRequest, status: int, title: str, detail: str, *, slug: str, errors: list[dict] | None = None
) -> HttpResponse:
    doc = {
        "type": PROBLEM_TYPE + slug,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.path,
        "errors": errors or [],
    }
    response = JsonResponse(doc, status=status, content_type=PROBLEM_MEDIA_TYPE)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="frame-governance"'
    return response


def pointer(location: list) -> str:
    return "#/" + "/".join(str(part).replace("~", "~0").replace("/", "~1") for part in location)


def field_error(location, detail: str) -> dict:
    location = [part if isinstance(part, int) else str(part) for part in location]
    return {"location": location, "pointer": pointer(location), "detail": detail}
