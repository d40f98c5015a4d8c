"""Proposals: frame edits as JSON Merge Patches, each stored as a new immutable FrameVersion."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from authority.models import FrameVersion, Role
from authority.states import FINAL_STATES as FINAL_STATES  # the app's vocabulary, next to its models
from authority.states import ProposalState


class ProposalKind(models.TextChoices):
    CHANGE = "change"  # a lead's edit of the frame
    REBASE = "rebase"  # an earlier proposal's patch re-applied over the version current now
    ROLLBACK = "rollback"  # restores an earlier version: its patch is current → that version


class Proposal(models.Model):
    """A frame edit: a JSON Merge Patch over the promoted version, stored as a new FrameVersion.

    The FrameVersion it created is immutable; `state` is a convenience read-model of the
    append-only audit trail (backtests, approvals, promotions).
    """

    project = models.ForeignKey(
        "selection.Project", on_delete=models.PROTECT, related_name="proposals"
    )
    uid = models.CharField(
        max_length=200, blank=True, help_text="the id in proposals.yaml, when imported"
    )
    title = models.CharField(max_length=300)
    rationale = models.TextField(blank=True)
    patch = models.JSONField()
    base_version = models.ForeignKey(FrameVersion, on_delete=models.PROTECT, related_name="+")
    frame_version = models.OneToOneField(
        FrameVersion, on_delete=models.PROTECT, related_name="proposal"
    )
    warnings = models.JSONField(default=list, blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(
        max_length=12, choices=ProposalState.choices, default=ProposalState.PROPOSED
    )
    kind = models.CharField(max_length=10, choices=ProposalKind.choices, default=ProposalKind.CHANGE)
    # a submitted proposal never changes (trigger), so a rebase is a new proposal naming the one it
    # replaces; the old one is closed with a ProposalClosure that names the new one
    supersedes = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="superseded_by"
    )
    restores = models.ForeignKey(
        FrameVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        help_text="the earlier version a rollback restores",
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.title


class ProposalClosure(models.Model):
    """A proposal closed without promotion, with why: by a lead, or by the rebase that replaced it.

    Append-only (trigger): a closed proposal stays closed; its change lives on in `superseded_by`
    when a rebase replaced it.
    """

    proposal = models.OneToOneField(Proposal, on_delete=models.PROTECT, related_name="closure")
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    reason = models.TextField()
    superseded_by = models.ForeignKey(
        Proposal, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    closed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~models.Q(reason=""), name="proposal_closure_has_reason"),
        ]


class ApiToken(models.Model):
    """A personal API token: only a SHA-256 digest of its secret is stored; the secret is shown once.

    Scoped to one role in one project, or (project null, role blank) read only across the owner's
    projects; access.py narrows the owner's grants by that scope on every request.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True, help_text="the visible start of the token")
    digest = models.CharField(max_length=64, unique=True, help_text="sha256 of the whole token")
    project = models.ForeignKey(
        "selection.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    role = models.CharField(max_length=10, choices=Role.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(project__isnull=True) & models.Q(role=""))
                | (models.Q(project__isnull=False) & ~models.Q(role="")),
                name="api_token_scope_whole",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class WebhookEndpoint(models.Model):
    """Where a project's events are POSTed, signed with HMAC-SHA256 of the body under `secret`."""

    project = models.ForeignKey("selection.Project", on_delete=models.PROTECT, related_name="webhooks")
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=64)
    events = models.JSONField(help_text="the event names it receives")
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "id"]


class WebhookDeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"  # gave up after its retries


class WebhookDelivery(models.Model):
    """One event sent to one endpoint: its payload as signed, and how each attempt went."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.PROTECT, related_name="deliveries")
    event = models.CharField(max_length=50)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(
        max_length=10, choices=WebhookDeliveryStatus.choices, default=WebhookDeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
