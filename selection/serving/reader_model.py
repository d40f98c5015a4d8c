"""The model frame builder's boundary: one chat completion from an OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable

from django.conf import settings


class ReaderModelError(RuntimeError):
    """No usable answer: the endpoint timed out, refused, or answered outside the protocol."""


def chat_url(base: str) -> str:
    """`…/v1/chat/completions` from a base URL given with or without the path."""
    base = base.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions"


def completion_client(
    url: str | None = None, model: str | None = None, timeout: float | None = None
) -> Callable[[dict], str] | None:
    """A `complete(request) -> answer text` function for the configured endpoint; None when the
    model builder is off (no FG_READER_MODEL_URL)."""
    url = url if url is not None else settings.FG_READER_MODEL_URL
    model = model if model is not None else settings.FG_READER_MODEL_NAME
    timeout = timeout if timeout is not None else settings.FG_READER_MODEL_TIMEOUT
    if not url:
        return None

    def complete(request: dict) -> str:
        body = json.dumps({"model": model, **request}).encode()
        http = urllib.request.Request(
            chat_url(url), data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(http, timeout=timeout) as response:
                doc = json.loads(response.read().decode())
        except (OSError, ValueError) as error:  # timeouts and refusals are OSErrors
            raise ReaderModelError(str(error)) from error
        try:
            content = doc["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as error:
            raise ReaderModelError(f"no choices[0].message.content in the answer: {error}") from error
        if not isinstance(content, str):
            raise ReaderModelError("the answer's content is not text")
        return content

    return complete
