"""Rate limits per API token and per user, counted in the shared cache (redis), one rule per kind.

A kind (select, write, evaluation, upload) has a limit for each token and one for each user
(all of the user's tokens and their session together): FG_RATE_LIMITS, "requests/seconds", a
window opened by its first request. An API route takes its limit in one line,

    @router.post("/select", ..., throttle=rate_limit("select"))

which refuses past the limit with 429 problem details and `Retry-After` before the body is even
read, so nothing is written; any other surface (the MCP server) calls `rate_check(user, kind)`,
which raises RateLimited. Without the cache (redis down) a request is let through and a warning
logged: the limits guard capacity, and a selection must not fail because its counter could not be.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import caches
from django.db import connection
from ninja.throttling import BaseThrottle
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

KINDS = ("select", "write", "evaluation", "upload")
CACHE_ALIAS = "ratelimits"


@dataclass(frozen=True)
class Rate:
    requests: int  # 0: no limit
    seconds: int

    @classmethod
    def parse(cls, text: str) -> Rate:
        requests, _, seconds = str(text).partition("/")
        rate = cls(int(requests), int(seconds or 60))
        if rate.requests < 0 or rate.seconds < 1:
            raise ValueError(f"a rate is requests/seconds, not {text!r}")
        return rate


class RateLimited(Exception):
    """Over a limit: `retry_after` seconds until the window that refused it closes."""

    def __init__(self, *, kind: str, scope: str, rate: Rate, retry_after: int):
        self.kind, self.scope, self.rate, self.retry_after = kind, scope, rate, retry_after
        super().__init__(
            f"over the {kind} limit of {rate.requests} requests per {rate.seconds} s for this {scope}; "
            f"retry after {retry_after} s"
        )


def rates(kind: str) -> dict[str, Rate]:
    """The per-token and per-user rates of `kind`, from FG_RATE_LIMITS."""
    if kind not in KINDS:
        raise ValueError(f"no rate limit kind {kind!r}: one of {', '.join(KINDS)}")
    configured = settings.FG_RATE_LIMITS[kind]
    return {scope: Rate.parse(configured[scope]) for scope in ("token", "user")}


def _counted(key: str, rate: Rate, now: float) -> tuple[int, float]:
    """This request's number in the window of `key`, and when that window opened."""
    cache = caches[CACHE_ALIAS]
    cache.add(f"{key}:opened", now, timeout=rate.seconds)
    cache.add(key, 0, timeout=rate.seconds)
    try:
        count = cache.incr(key)
    except ValueError:  # the window closed between the two calls: this request opens the next
        cache.set(key, 1, timeout=rate.seconds)
        cache.set(f"{key}:opened", now, timeout=rate.seconds)
        count = 1
    return count, float(cache.get(f"{key}:opened", now))


def rate_check(user, kind: str) -> None:
    """Count one request of `kind` by `user` (and the token it came with); RateLimited past a limit."""
    now = time.time()
    counters = []
    token_id = getattr(user, "api_token_id", None)
    if token_id is not None:
        counters.append(("token", token_id))
    if getattr(user, "pk", None) is not None:
        counters.append(("user", user.pk))
    refusal: RateLimited | None = None
    for (scope, ident), rate in ((c, rates(kind)[c[0]]) for c in counters):
        if rate.requests == 0:
            continue
        key = f"{settings.FG_RATE_KEY_PREFIX}:{connection.settings_dict['NAME']}:{kind}:{scope}:{ident}"
        try:
            count, opened = _counted(key, rate, now)
        except (RedisError, OSError) as failure:
            logger.warning("rate limit of %s not counted (cache unavailable: %s); let through", kind, failure)
            return
        if count > rate.requests:
            retry_after = max(1, math.ceil(opened + rate.seconds - now))
            if refusal is None or retry_after > refusal.retry_after:
                refusal = RateLimited(kind=kind, scope=scope, rate=rate, retry_after=retry_after)
    if refusal is not None:
        raise refusal


_refused = threading.local()


class RateLimit(BaseThrottle):
    """django-ninja's throttle hook (after authentication, before the body is parsed) for `kind`."""

    def __init__(self, kind: str):
        rates(kind)  # an unknown kind fails at import, not at the first request
        self.kind = kind

    def allow_request(self, request) -> bool:
        _refused.error = None
        try:
            rate_check(getattr(request, "auth", None), self.kind)
        except RateLimited as refused:
            _refused.error = refused
            request.rate_limited = refused  # read by the API's 429 problem details
            return False
        return True

    def wait(self) -> float | None:
        error = getattr(_refused, "error", None)
        return float(error.retry_after) if error is not None else None


def rate_limit(kind: str) -> list[BaseThrottle]:
    """What a route's `throttle=` takes for the limits of `kind`."""
    return [RateLimit(kind)]
