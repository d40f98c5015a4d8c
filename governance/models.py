"""Proposals: frame edits as JSON Merge Patches, each stored as a new immutable FrameVersion."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from authority.models import FrameVersion


class ProposalState(models.TextChoices):
    PROPOSED = "proposed"
    BACKTESTING = "backtesting"
    PASSED = "passed"
    FAILED = "failed"
    APPROVED = "approved"
    REJECTED = "rejected"
    PROMOTED = "promoted"


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

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.title
