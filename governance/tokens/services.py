"""Personal API tokens: created and revoked by their owner only, audited in the same transaction.

A token is `fg_<prefix>_<secret>`; only the SHA-256 of the whole string is stored, so the token
is shown once, at creation. Its scope (one role in one project, an agent of one project, or read
only) is attached to the user of each request it authenticates, and access.py narrows every check
by it. An agent token (role `agent`, access.AGENT_SCOPE) selects, writes memory and reports
outcomes in its project; a lead or a reviewer of the project issues it.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from authority import access
from authority.audit import audit_record
from authority.errors import GovernanceError
from selection.models import Project

from ..models import ApiToken

TOKEN_PREFIX = "fg_"
LIFETIMES_DAYS = (7, 30, 90, 365)
DEFAULT_LIFETIME_DAYS = 30
# last_used_at is written at most this often per token: a busy agent does not write every request
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenRefused(GovernanceError):
    """A token that cannot be created or revoked as asked."""


@dataclass(frozen=True)
class IssuedToken:
    """A new token and its secret, which exists only here: show it once."""

    token: ApiToken
    secret: str


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_create(
    *, user, name: str, project: Project | None = None, role: str | None = None, days: int = DEFAULT_LIFETIME_DAYS
) -> IssuedToken:
    """A token for `user`, limited to `role` in `project` (a role they hold) or read only."""
    scope = access.access_token_scope(user, project, role)
    name = (name or "").strip()
    if not name:
        raise TokenRefused("a token needs a name saying where it is used")
    if days not in LIFETIMES_DAYS:
        raise TokenRefused(f"a token lives {', '.join(map(str, LIFETIMES_DAYS))} days, not {days}")
    prefix = secrets.token_hex(4)
    secret = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name[:100],
            prefix=prefix,
            digest=_digest(secret),
            project=project if scope.project_id else None,
            role=scope.role or "",
            expires_at=timezone.now() + timedelta(days=days),
        )
        audit_record(
            actor=user,
            project=token.project,
            action="token.created",
            obj=token,
            summary=f"API token {token.name} ({scope_label(token)}, {days} days)",
            payload={"prefix": prefix, "role": token.role, "expires_at": token.expires_at.isoformat()},
        )
    return IssuedToken(token=token, secret=secret)


def token_revoke(*, user, token_id: int) -> ApiToken:
    """Revoke one of the user's own tokens; revoking twice changes nothing more."""
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().filter(user=user, pk=token_id).first()
        if token is None:
            raise TokenRefused(f"you hold no token #{token_id}")
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit_record(
                actor=user,
                project=token.project,
                action="token.revoked",
                obj=token,
                summary=f"API token {token.name} ({scope_label(token)}) revoked",
                payload={"prefix": token.prefix},
            )
    return token


def token_user(secret: str):
    """The active owner of a live token, carrying its scope as `token_scope`; None otherwise."""
    if not secret.startswith(TOKEN_PREFIX):
        return None
    now = timezone.now()
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=_digest(secret), revoked_at__isnull=True, expires_at__gt=now)
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    user = token.user
    user.token_scope = access.TokenScope(project_id=token.project_id, role=token.role or None)
    user.api_token_id = token.pk
    return user


def token_user_from_header(value: str):
    """token_user for an `Authorization: Bearer <token>` header value."""
    scheme, _, secret = (value or "").partition(" ")
    return token_user(secret.strip()) if scheme.lower() == "bearer" and secret.strip() else None


def tokens_of(*, user) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).select_related("project").order_by("-created_at", "-id")


def scope_label(token: ApiToken) -> str:
    if token.project_id is None:
        return "read only, all your projects"
    return f"{token.role} in {token.project.slug}"
