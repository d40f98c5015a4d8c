"""Every role check lives here; the UI, the CLI and the API call these helpers and nothing else.

Roles are granted per project (RoleGrant): a lead proposes and promotes, a reviewer approves or
rejects a backtest result, an auditor reads everything and changes nothing. A superuser may read
every project but, like anyone, needs a grant to write.

A request made with a personal API token carries the token's scope on its user (`token_scope`,
set by the API's authentication): one role in one project, or reading only. Every check below
narrows the user's grants by that scope, so a token never does more than its owner could through
the pages, and the services need not know how the request arrived.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from .models import Role, RoleGrant


class AccessDenied(PermissionDenied):
    """The user lacks the role this action needs in this project (HTTP 403, CLI error)."""


# an API token's scope that is no role: an agent selects, writes memory and reports outcomes in
# its one project, and does nothing else; a lead or a reviewer of the project may issue one
AGENT_SCOPE = "agent"
AGENT_ISSUERS = frozenset({Role.LEAD, Role.REVIEWER})


@dataclass(frozen=True)
class TokenScope:
    """What an API token lets its owner do: `role` (or AGENT_SCOPE) in project `project_id`, or read
    only (both None)."""

    project_id: int | None = None
    role: str | None = None

    @property
    def read_only(self) -> bool:
        return self.project_id is None


def token_scope(user) -> TokenScope | None:
    """The scope of the token this request was made with; None for a session (the full grants)."""
    return getattr(user, "token_scope", None)


@dataclass(frozen=True)
class Capabilities:
    """What one user may do in one project; the only place a role becomes a permission."""

    roles: frozenset[str]
    superuser: bool = False
    read_only: bool = False  # a read-only API token: the roles read, they write nothing
    agent: bool = False  # an agent token: reads, writes memory, reports outcomes; no role

    @property
    def can_read(self) -> bool:
        return self.superuser or bool(self.roles) or self.agent

    @property
    def can_write_memory(self) -> bool:
        # a unit written by a lead, or by an agent (under candidate admission it waits for review)
        return not self.read_only and (self.agent or Role.LEAD in self.roles)

    @property
    def can_admit_memory(self) -> bool:
        # a candidate unit admitted or declined: a lead or a reviewer, never through an agent token
        return not self.read_only and bool(self.roles & {Role.LEAD, Role.REVIEWER})

    @property
    def can_propose(self) -> bool:
        return not self.read_only and Role.LEAD in self.roles

    @property
    def can_promote(self) -> bool:
        return not self.read_only and Role.LEAD in self.roles

    @property
    def can_review(self) -> bool:
        return not self.read_only and Role.REVIEWER in self.roles

    @property
    def can_comment(self) -> bool:
        # the review discussion: leads and reviewers speak, auditors read
        return not self.read_only and bool(self.roles & {Role.LEAD, Role.REVIEWER})

    @property
    def can_replay(self) -> bool:
        # a replay writes a new trace; leads and reviewers may, auditors only read
        return not self.read_only and bool(self.roles & {Role.LEAD, Role.REVIEWER})


def _active(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False) and user.is_active


def capabilities(user, project) -> Capabilities:
    """One query: the user's roles in the project (superusers read all, but write only by grant),
    narrowed by the scope of the API token the request carries."""
    if not _active(user):
        return Capabilities(frozenset())
    scope = token_scope(user)
    if scope is not None and not scope.read_only and scope.project_id != project.pk:
        return Capabilities(frozenset())
    roles = frozenset(
        RoleGrant.objects.filter(user=user, project=project).values_list("role", flat=True)
    )
    if scope is None:
        return Capabilities(roles, superuser=user.is_superuser)
    if scope.read_only:
        return Capabilities(roles, superuser=user.is_superuser, read_only=True)
    if scope.role == AGENT_SCOPE:
        # the token lives while its owner still holds a role that may issue it
        return Capabilities(frozenset(), agent=bool(roles & AGENT_ISSUERS))
    return Capabilities(roles & {scope.role}, superuser=False)


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


def access_propose(user, project, *, action: str = "propose a frame change") -> Capabilities:
    """A lead's right to change proposals; `action` names, in the refusal, what was refused
    (split a proposal, close it, roll back, ...)."""
    return _require(user, project, "can_propose", Role.LEAD, action)


def access_promote(user, project, *, action: str = "promote a frame version") -> Capabilities:
    return _require(user, project, "can_promote", Role.LEAD, action)


def access_webhooks(user, project) -> Capabilities:
    """See and change the project's webhooks (their URLs and secrets): a lead of the project."""
    return _require(user, project, "can_promote", Role.LEAD, "manage webhooks")


def access_backtest(user, project) -> Capabilities:
    """Start (or re-run) a backtest of a proposal: a lead of the project."""
    return _require(user, project, "can_propose", Role.LEAD, "start a backtest")


def access_erase(user, project) -> Capabilities:
    """Erase a unit's text from the unit and every trace: a lead of the unit's project."""
    return _require(user, project, "can_promote", Role.LEAD, "erase unit text")


def access_retention(user, project) -> Capabilities:
    """Change how long the project's traces keep their payload: a lead of the project."""
    return _require(user, project, "can_promote", Role.LEAD, "change the retention policy")


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


def access_comment(user, project) -> Capabilities:
    """Comment in a proposal's review discussion: a lead or a reviewer of the project."""
    caps = capabilities(user, project)
    if not caps.can_comment:
        raise AccessDenied(
            f"{_who(user)} may not comment in {project.slug}: it needs the project lead or reviewer role"
        )
    return caps


def access_label(user, project) -> Capabilities:
    """Turn a trace into a labelled evaluation task (it changes the project's task set): a lead or
    a reviewer of the project."""
    caps = capabilities(user, project)
    if not caps.can_comment:
        raise AccessDenied(
            f"{_who(user)} may not label traces in {project.slug}: it needs the project lead or reviewer role"
        )
    return caps


def readable_projects(user, projects: QuerySet) -> QuerySet:
    """Of `projects` (a Project queryset), those `user` may read: all for a superuser, else those
    where they hold any role. The caller passes the queryset: this layer sits below the models
    that own projects."""
    if not _active(user):
        return projects.none()
    scope = token_scope(user)
    if scope is not None and not scope.read_only:
        # a project-scoped API token reads its one project, while its owner holds the role there
        roles = AGENT_ISSUERS if scope.role == AGENT_SCOPE else {scope.role}
        return projects.filter(
            pk=scope.project_id, role_grants__user=user, role_grants__role__in=roles
        ).distinct()
    if user.is_superuser:
        return projects
    return projects.filter(role_grants__user=user).distinct()


def reads_all_projects(user) -> bool:
    """A superuser reads every project, unless the request's API token holds it to one."""
    if not _active(user) or not user.is_superuser:
        return False
    scope = token_scope(user)
    return scope is None or scope.read_only


def reads_unscoped_audit(user) -> bool:
    """Audit entries bound to no project are shown to superusers and to auditors of any project
    (not to a request made with a project-scoped API token)."""
    if not _active(user):
        return False
    scope = token_scope(user)
    if scope is not None and not scope.read_only:
        return False
    return user.is_superuser or RoleGrant.objects.filter(user=user, role=Role.AUDITOR).exists()


def access_token_scope(user, project, role: str | None) -> TokenScope:
    """The scope a user may give a new token of theirs: a role they hold in the project, or
    reading only (project and role both None)."""
    if not _active(user):
        raise AccessDenied("sign in to create an API token")
    if project is None and not role:
        return TokenScope()
    if project is None or not role:
        raise AccessDenied("a token is scoped to one role in one project, or is read only")
    if role == AGENT_SCOPE:
        if not RoleGrant.objects.filter(user=user, project=project, role__in=AGENT_ISSUERS).exists():
            raise AccessDenied(
                f"{_who(user)} may not issue an agent token for {project.slug}: "
                "it needs the project lead or reviewer role there"
            )
        return TokenScope(project_id=project.pk, role=AGENT_SCOPE)
    if role not in Role.values:
        raise AccessDenied(f'"{role}" is not a role')
    if not RoleGrant.objects.filter(user=user, project=project, role=role).exists():
        raise AccessDenied(f"{_who(user)} does not hold the {Role(role).label.lower()} role in {project.slug}")
    return TokenScope(project_id=project.pk, role=role)


def access_write_memory(user, project) -> Capabilities:
    """Write a memory unit (create, supersede, refute, echo, support, close or reopen a loop): a
    lead of the project, or an agent token of it."""
    caps = capabilities(user, project)
    if not caps.can_write_memory:
        raise AccessDenied(
            f"{_who(user)} may not write memory in {project.slug}: "
            "it needs the project lead role or an agent token of the project"
        )
    return caps


def access_admit_memory(user, project) -> Capabilities:
    """Admit or decline a candidate unit (the "To admit" queue): a lead or a reviewer."""
    caps = capabilities(user, project)
    if not caps.can_admit_memory:
        raise AccessDenied(
            f"{_who(user)} may not admit or decline memory in {project.slug}: "
            "it needs the project lead or reviewer role"
        )
    return caps


def access_report_outcome(user, project) -> Capabilities:
    """An agent reports how a bundle served it: any role in the project (or an agent token), not a
    read-only token."""
    caps = capabilities(user, project)
    if not (caps.roles or caps.agent) or caps.read_only:
        raise AccessDenied(
            f"{_who(user)} may not report outcomes in {project.slug}: it needs a role there (not a read-only token)"
        )
    return caps


def access_corpus_import(user) -> None:
    """Importing a corpus creates projects, which no project role covers: superusers only, and not
    through an API token (a token is held to one project, or to reading)."""
    if not _active(user) or not user.is_superuser or token_scope(user) is not None:
        raise AccessDenied(f"{_who(user)} may not import a corpus: it needs a signed-in superuser")


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
    grants = RoleGrant.objects.filter(user=user, project__corpus=corpus)
    scope = token_scope(user)
    if scope is not None and not scope.read_only:
        grants = grants.filter(project_id=scope.project_id, role=scope.role)
    roles = set(grants.values_list("role", flat=True))
    writes = scope is None or not scope.read_only
    return CorpusCapabilities(
        can_read=reads_all_projects(user) or bool(roles), can_evaluate=writes and Role.LEAD in roles
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
