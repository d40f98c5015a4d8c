"""Frame versions, promotions, role grants and the audit log: the rows every app reads.

FrameVersion, Promotion and AuditEntry rows are append-only: PostgreSQL triggers (governance
migration 0002) refuse UPDATE and DELETE, so no code path can rewrite history. The tables keep the
names they were born with in the governance app (authority migration 0001 moved only the state).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class FrameVersion(models.Model):
    """An immutable JSON snapshot of a whole ProjectFrame."""

    project = models.ForeignKey(
        "selection.Project", on_delete=models.PROTECT, related_name="frame_versions"
    )
    number = models.PositiveIntegerField()
    snapshot = models.JSONField()
    parent = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="children"
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    author_label = models.CharField(
        max_length=150, help_text="who wrote it, as shown (import, a username)"
    )
    origin = models.CharField(max_length=20, default="proposal", help_text="import | proposal")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "number"], name="frame_version_number_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug} v{self.number}"


class Promotion(models.Model):
    """Makes a FrameVersion the project's current one; the latest promotion wins."""

    project = models.ForeignKey(
        "selection.Project", on_delete=models.PROTECT, related_name="promotions"
    )
    frame_version = models.ForeignKey(
        FrameVersion, on_delete=models.PROTECT, related_name="promotions"
    )
    # sequence is previous + 1: two concurrent promotions collide on the unique constraint
    sequence = models.PositiveIntegerField()
    promoted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    promoted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "sequence"], name="promotion_sequence_unique"
            ),
        ]


class Role(models.TextChoices):
    LEAD = "lead", "Project lead"
    REVIEWER = "reviewer", "Reviewer"
    AUDITOR = "auditor", "Auditor"


class RoleGrant(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="role_grants"
    )
    project = models.ForeignKey(
        "selection.Project", on_delete=models.CASCADE, related_name="role_grants"
    )
    role = models.CharField(max_length=10, choices=Role.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "project", "role"], name="role_grant_unique"),
        ]


class AuditEntry(models.Model):
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    actor_label = models.CharField(max_length=150)
    project = models.ForeignKey(
        "selection.Project",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="audit_entries",
    )
    action = models.CharField(max_length=50, db_index=True)
    object_type = models.CharField(max_length=50)
    object_id = models.CharField(max_length=100)
    summary = models.TextField(blank=True)
    payload = models.JSONField(default=dict)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"


