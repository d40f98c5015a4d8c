"""The home page as an inbox: what is waiting for this user, by the roles they hold per project.

A reviewer sees proposals whose backtest finished and awaits a verdict; a lead sees the proposals
they can promote or must act on (failed, rejected, stale, never backtested); everyone sees running
backtests and recent promotions in their projects; an auditor sees recent activity; leads and
reviewers see each of their projects whose promoted frame fails a declared gate now (frame
health, from backtest.health.selectors). A fixed number of queries, whatever the number of projects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from authority.models import AuditEntry, Promotion, Role, RoleGrant
from backtest.health.selectors import HealthAlert, health_alerts
from selection.models import Project

from .models import FINAL_STATES, Proposal, ProposalState

RECENT = 8


@dataclass(frozen=True)
class InboxRow:
    proposal: Proposal
    stale: bool  # written over a version that is no longer current
    why: str  # what the user is expected to do, in a few words


@dataclass(frozen=True)
class Inbox:
    roles: frozenset[str]  # every role the user holds somewhere
    awaiting_review: list[InboxRow] = field(default_factory=list)
    to_promote: list[InboxRow] = field(default_factory=list)
    needs_attention: list[InboxRow] = field(default_factory=list)
    running: list[InboxRow] = field(default_factory=list)
    promotions: list[Promotion] = field(default_factory=list)
    activity: list[AuditEntry] = field(default_factory=list)
    health: list[HealthAlert] = field(default_factory=list)  # frames failing a gate now

    @property
    def empty(self) -> bool:
        return not (self.awaiting_review or self.to_promote or self.needs_attention or self.running or self.health)


def current_versions(project_ids) -> dict[int, int]:
    """project id -> the id of its current (latest promoted) frame version (one query)."""
    current: dict[int, int] = {}
    for project_id, version_id in (
        Promotion.objects.filter(project_id__in=list(project_ids))
        .order_by("project_id", "-sequence")
        .values_list("project_id", "frame_version_id")
    ):
        current.setdefault(project_id, version_id)
    return current


def is_stale(proposal: Proposal, current: dict[int, int]) -> bool:
    return proposal.state not in FINAL_STATES and current.get(proposal.project_id) != proposal.base_version_id


def inbox_for(user) -> Inbox:
    grants: dict[int, set[str]] = {}
    for project_id, role in RoleGrant.objects.filter(user=user).values_list("project_id", "role"):
        grants.setdefault(project_id, set()).add(role)
    readable = list(Project.objects.values_list("pk", flat=True)) if user.is_superuser else list(grants)
    roles = frozenset(r for rs in grants.values() for r in rs)
    current = current_versions(readable)
    open_states = [s for s in ProposalState.values if s not in FINAL_STATES]
    proposals = (
        Proposal.objects.filter(project_id__in=readable, state__in=open_states)
        .select_related("project", "author", "base_version", "frame_version")
        .order_by("-created_at", "-id")
    )
    inbox = Inbox(roles=roles)
    for p in proposals:
        mine = grants.get(p.project_id, set())
        stale = is_stale(p, current)
        if p.state == ProposalState.BACKTESTING:
            inbox.running.append(InboxRow(p, stale, "backtest running"))
        if Role.REVIEWER in mine and p.state in (ProposalState.PASSED, ProposalState.FAILED) and not stale:
            verdict = "approve or reject" if p.state == ProposalState.PASSED else "reject (it failed its gates)"
            inbox.awaiting_review.append(InboxRow(p, stale, verdict))
        # a lead's own proposals, and those imported with no author in the lead's projects
        if Role.LEAD in mine and (p.author_id is None or p.author_id == user.pk):
            if p.state == ProposalState.APPROVED and not stale:
                inbox.to_promote.append(InboxRow(p, stale, "approved: promote it"))
            elif stale:
                inbox.needs_attention.append(InboxRow(p, stale, "stale: resubmit over the current version or close"))
            elif p.state == ProposalState.PROPOSED:
                inbox.needs_attention.append(InboxRow(p, stale, "no backtest yet: run one"))
            elif p.state in (ProposalState.FAILED, ProposalState.REJECTED):
                inbox.needs_attention.append(InboxRow(p, stale, f"{p.state}: revise and propose again"))
    promotions = Promotion.objects.filter(project_id__in=readable).select_related(
        "project", "frame_version", "promoted_by"
    )
    inbox.promotions.extend(promotions.order_by("-promoted_at", "-id")[:RECENT])
    watched = [pid for pid, held in grants.items() if held & {Role.LEAD, Role.REVIEWER}]
    if watched:
        inbox.health.extend(health_alerts(project_ids=watched))
    if Role.AUDITOR in roles or user.is_superuser:
        entries = AuditEntry.objects.filter(project_id__in=readable).select_related("project")
        inbox.activity.extend(entries.order_by("-at", "-id")[: RECENT * 2])
    return inbox
