"""Every role check lives here; the UI, the CLI and the API call these helpers and nothing else.

Roles are granted per project (RoleGrant): a lead proposes and promotes, a reviewer approves or
rejects a backtest result, an auditor reads everything and changes nothing. A superuser may read
every project but, like anyone, needs a grant to write.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from .models import Role, RoleGrant


class AccessDenied(PermissionDenied):
    """The user lacks the role this action needs in this project (HTTP 403, CLI error)."""


@dataclass(frozen=True)
class Capabilities:
    """What one user may do in one project; the only place a role becomes a permission."""

    roles: frozenset[str]
    superuser: bool = False

    @property
    def can_read(self) -> bool:
        return self.superuser or bool(self.roles)

    @property
    def can_propose(self) -> bool:
        return Role.LEAD in self.roles

    @property
    def can_promote(self) -> bool:
        return Role.LEAD in self.roles

    @property
    def can_review(self) -> bool:
        return Role.REVIEWER in self.roles

    @property
    def can_replay(self) -> bool:
        # a replay writes a new trace; leads and reviewers may, auditors only read
        return bool(self.roles & {Role.LEAD, Role.REVIEWER})


def _active(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False) and user.is_active


def capabilities(user, project) -> Capabilities:
    """One query: the user's roles in the project (superusers read all, but write only by grant)."""
    if not _active(user):
        return Capabilities(frozenset())
    roles = frozenset(
        RoleGrant.objects.filter(user=user, project=project).values_list("role", flat=True)
    )
    return Capabilities(roles, superuser=user.is_superuser)


def _who(user) -> str:
    return getattr(user, "username", None) or "anonymous"


def _require(user, project, allowed: str, role: Role, action: str) -> Capabilities:
    caps = capabilities(user, project)
    if not getattr(caps, allowed):
        raise AccessDenied(
            f"{_who(user)} may not {action} in {project.slug}: "
            f"it needs the {role.label.lower()} role"
        )
    return caps


def access_read(user, project) -> Capabilities:
    """Any role in the project, or a superuser, may read all of it; returns what else they may."""
    caps = capabilities(user, project)
    if not caps.can_read:
        raise AccessDenied(f"{_who(user)} holds no role in {project.slug}")
    return caps


def access_propose(user, project) -> Capabilities:
    return _require(user, project, "can_propose", Role.LEAD, "propose a frame change")


def access_promote(user, project) -> Capabilities:
    return _require(user, project, "can_promote", Role.LEAD, "promote a frame version")


def access_review(user, project) -> Capabilities:
    return _require(user, project, "can_review", Role.REVIEWER, "approve or reject a backtest")


def access_replay(user, project) -> Capabilities:
    """Replay a stored trace under today's frame (writes a new trace): a lead or a reviewer."""
    caps = capabilities(user, project)
    if not caps.can_replay:
        raise AccessDenied(
            f"{_who(user)} may not replay traces in {project.slug}: "
            "it needs the project lead or reviewer role"
        )
    return caps


def readable_projects(user, projects: QuerySet) -> QuerySet:
    """Of `projects` (a Project queryset), those `user` may read: all for a superuser, else those
    where they hold any role. The caller passes the queryset: this layer sits below the models
    that own projects."""
    if not _active(user):
        return projects.none()
    if user.is_superuser:
        return projects
    return projects.filter(role_grants__user=user).distinct()


def reads_unscoped_audit(user) -> bool:
    """Audit entries bound to no project are shown to superusers and to auditors of any project."""
    if not _active(user):
        return False
    return user.is_superuser or RoleGrant.objects.filter(user=user, role=Role.AUDITOR).exists()


# --- corpora: evaluations span every project of a corpus ---------------------------------------


@dataclass(frozen=True)
class CorpusCapabilities:
    """What one user may do with a whole corpus (its evaluations)."""

    can_read: bool
    can_evaluate: bool


def corpus_capabilities(user, corpus) -> CorpusCapabilities:
    """One query: any role on one of the corpus's projects reads it; a lead on one may evaluate."""
    if not _active(user):
        return CorpusCapabilities(False, False)
    roles = set(
        RoleGrant.objects.filter(user=user, project__corpus=corpus).values_list("role", flat=True)
    )
    return CorpusCapabilities(
        can_read=user.is_superuser or bool(roles), can_evaluate=Role.LEAD in roles
    )


def access_corpus_read(user, corpus) -> CorpusCapabilities:
    caps = corpus_capabilities(user, corpus)
    if not caps.can_read:
        raise AccessDenied(f"{_who(user)} holds no role in any project of {corpus.name}")
    return caps


def access_evaluate(user, corpus) -> CorpusCapabilities:
    """Running an evaluation writes traces for every project of the corpus: a lead of one of them."""
    caps = corpus_capabilities(user, corpus)
    if not caps.can_evaluate:
        raise AccessDenied(
            f"{_who(user)} may not evaluate {corpus.name}: "
            "it needs the project lead role in one of its projects"
        )
    return caps
