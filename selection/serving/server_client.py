"""A read command run by the installation's running server when one answers, else in this process.

The server has the model and every corpus index loaded; a fresh command process would pay for both
on every call. The command's parsed options go to the server's local command channel
(config/local_commands.py), which runs the same command there, in its process, and hands back what
it wrote and its exit status; the client writes the same text and exits with the same status.

Trust: the channel answers loopback connections only, and each request carries an HMAC-SHA256 of
its body, its time and a nonce under a key derived from the installation's SECRET_KEY, the one
secret that whoever can run a management command here already holds (with it they could sign a
session cookie); the server refuses an old, replayed or unsigned request, and one from a process
whose database is another (another checkout's server on the same port). No request runs a command
the channel does not list. Nothing answers unauthenticated.

FG_SERVER_URL names the server (default http://127.0.0.1:8000; empty: always in this process).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection

CHANNEL_PATH = "/local/command"
DEFAULT_SERVER_URL = "http://127.0.0.1:8000"
MAX_AGE_SECONDS = 30  # a signed request older (or newer) than this is refused
CONNECT_SECONDS = 0.5
ANSWER_SECONDS = 300  # a selection on a busy machine; past it the command fails, it does not rerun
HEADER_SIGNATURE = "X-FG-Local-Signature"
HEADER_TIME = "X-FG-Local-Time"
HEADER_NONCE = "X-FG-Local-Nonce"


def server_url() -> str:
    return os.environ.get("FG_SERVER_URL", getattr(settings, "FG_SERVER_URL", DEFAULT_SERVER_URL)).strip()


def channel_key() -> bytes:
    """A key for this channel only, derived from SECRET_KEY (the secret itself is never sent)."""
    return hmac.new(settings.SECRET_KEY.encode(), b"frame-governance local command channel", hashlib.sha256).digest()


def database_identity() -> str:
    """Which database this process works on: the server refuses a client of another one."""
    db = connection.settings_dict  # a test run's database name, where settings still say the other
    return json.dumps([str(db.get("HOST", "")), str(db.get("PORT", "")), str(db.get("NAME", ""))])


def signature(body: bytes, stamp: str, nonce: str) -> str:
    message = b"\n".join([CHANNEL_PATH.encode(), stamp.encode(), nonce.encode(), hashlib.sha256(body).digest()])
    return hmac.new(channel_key(), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Answer:
    """What the server's run of the command wrote, and how it ended."""

    stdout: str
    stderr: str
    returncode: int
    error: str | None
    served_by: str


@dataclass(frozen=True)
class NotServed:
    """Why the command runs in this process (for --explain)."""

    reason: str


def served_here_or_there(command, name: str, options: dict, file_options: tuple[str, ...] = ()) -> str:
    """A command's hook: when the server takes the request, its output is written and its exit
    status raised here (CommandError) or returned as "" after success; otherwise the return is
    how this process serves it, for --explain. `options["served_by"]` set: the server's own run."""
    if options.get("served_by"):
        return f"by {options['served_by']}"
    answer = command_over_server(name, options, file_options)
    if isinstance(answer, NotServed):
        return f"in this process ({answer.reason})"
    command.stdout.write(answer.stdout, ending="")
    command.stderr.write(answer.stderr, ending="")
    if answer.error is not None:
        raise CommandError(answer.error, returncode=answer.returncode)
    return ""


def command_over_server(
    name: str, options: dict, file_options: tuple[str, ...] = (), *, url: str | None = None
) -> Answer | NotServed:
    """The command `name` with its parsed options, run by the server; NotServed when no server of
    this installation is ready to take it (nothing was run there). file_options: the options whose
    value is a path; its content goes with the request (the server does not read this disk).
    `url`: the server to ask (default FG_SERVER_URL)."""
    url = server_url() if url is None else url.strip()
    if not url:
        return NotServed("FG_SERVER_URL is empty")
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in {"127.0.0.1", "localhost", "::1"}:
        return NotServed(f"FG_SERVER_URL={url} is not a loopback http address")
    contents = {}
    for option in file_options:
        if options.get(option):
            try:
                contents[option] = Path(options[option]).read_text()
            except (OSError, UnicodeDecodeError):
                return NotServed(f"--{option} could not be read here")  # the command says why
    sent = {k: v for k, v in options.items() if k not in {"stdout", "stderr", "skip_checks"}}
    body = json.dumps(
        {"command": name, "options": sent, "files": contents, "database": database_identity()}, default=str
    ).encode()
    stamp, nonce = str(int(time.time())), secrets.token_hex(16)
    headers = {
        "Content-Type": "application/json",
        HEADER_TIME: stamp,
        HEADER_NONCE: nonce,
        HEADER_SIGNATURE: signature(body, stamp, nonce),
    }
    connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=CONNECT_SECONDS)
    try:
        connection.connect()
    except OSError as error:
        return NotServed(f"no server answered at {url} ({error.__class__.__name__})")
    try:
        connection.sock.settimeout(ANSWER_SECONDS)
        connection.request("POST", CHANNEL_PATH, body=body, headers=headers)
        response = connection.getresponse()
        text = response.read().decode()
    except (OSError, http.client.HTTPException) as error:
        if isinstance(error, TimeoutError):
            # it may have run: running it again here could write a second trace
            return Answer("", "", 1, f"the server at {url} did not answer within {ANSWER_SECONDS} s", url)
        return NotServed(f"the server at {url} dropped the request ({error.__class__.__name__})")
    finally:
        connection.close()
    if response.status != 200:
        try:
            detail = json.loads(text).get("detail", text)
        except (ValueError, AttributeError):
            detail = text[:200]
        return NotServed(f"the server at {url} did not take it: {response.status} {detail}".strip())
    doc = json.loads(text)
    return Answer(doc["stdout"], doc["stderr"], int(doc["returncode"]), doc["error"], f"the running server at {url}")
