"""The local command channel: a read command that a management command process hands to this
running server (selection.serving.server_client), run here with the model and the indexes already
loaded, and what it wrote handed back. Loopback only, every request signed (the client module says
how), commands from a fixed list; a refused request runs nothing.
"""

from __future__ import annotations

import hmac
import io
import json
import tempfile
import time
from pathlib import Path

from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from selection.serving import server_client

from . import site_health

# command -> the options whose value names a file (its content comes in the request)
COMMANDS = {"select": ("signals",)}
LOOPBACK = {"127.0.0.1", "::1"}
MAX_BODY = 1 << 20


def _refused(status: int, detail: str) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=status)


def _signed(request: HttpRequest) -> str | None:
    """None when the request is this installation's and fresh; else why not."""
    if request.META.get("REMOTE_ADDR") not in LOOPBACK:
        return "the local command channel answers loopback connections only"
    stamp = request.headers.get(server_client.HEADER_TIME, "")
    nonce = request.headers.get(server_client.HEADER_NONCE, "")
    given = request.headers.get(server_client.HEADER_SIGNATURE, "")
    if not (stamp.isdigit() and 16 <= len(nonce) <= 64 and given):
        return "unsigned request"
    if abs(time.time() - int(stamp)) > server_client.MAX_AGE_SECONDS:
        return "the request's time is too far from the server's"
    expected = server_client.signature(request.body, stamp, nonce)
    if not hmac.compare_digest(expected, given):
        return "bad signature (another installation's key)"
    if not cache.add(f"local-command-nonce:{nonce}", 1, 2 * server_client.MAX_AGE_SECONDS):
        return "replayed request"
    return None


@csrf_exempt
@require_POST
def local_command(request: HttpRequest) -> JsonResponse:
    if len(request.body) > MAX_BODY:
        return _refused(413, "request too large")
    refusal = _signed(request)
    if refusal:
        return _refused(403, refusal)
    try:
        doc = json.loads(request.body)
        name, options, files = doc["command"], dict(doc["options"]), dict(doc.get("files") or {})
    except (ValueError, KeyError, TypeError):
        return _refused(400, "the body is not a command request")
    if name not in COMMANDS or set(files) - set(COMMANDS[name]):
        return _refused(400, f"{name!r} is not a command this channel runs")
    if doc.get("database") != server_client.database_identity():
        return _refused(409, "this server works on another database")
    if not site_health.site_ready()["ready"]:
        return _refused(503, "the server is still loading")
    stdout, stderr = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory(prefix="local-command-") as scratch:
        for option, content in files.items():
            path = Path(scratch) / option
            path.write_text(content)
            options[option] = str(path)
        options["served_by"] = f"the running server at {request.get_host()}"
        try:
            call_command(name, stdout=stdout, stderr=stderr, **options)
            returncode, error = 0, None
        except CommandError as failure:
            returncode, error = failure.returncode, str(failure)
    return JsonResponse(
        {"stdout": stdout.getvalue(), "stderr": stderr.getvalue(), "returncode": returncode, "error": error}
    )
