"""Idempotency keys of memory writes: a write carrying a key is applied at most once."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from selection.models.memory import Project


class MemoryWriteKey(models.Model):
    """The first answer to a memory write sent with an `Idempotency-Key`: a retry with the same key
    and the same request gets this answer back; the same key with another request is refused.

    Keys are per writer and project: two agents may pick the same key without colliding.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    action = models.CharField(max_length=30, help_text="the audit action of the write")
    digest = models.CharField(max_length=64, help_text="sha256 of the action and the request as sent")
    answer = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "actor", "key"], name="memory_write_key_unique"),
        ]
