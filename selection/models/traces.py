"""Traces as stored: a selection's header and candidates, tombstones, retention policies, outcomes."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from selection.models.memory import Project, Task


class Trace(models.Model):
    """A frozen ContextTrace with its bundle; immutable once written (a trigger enforces it).

    Each project's traces form a hash chain (selection.traces.chain): `digest` covers this row, its
    candidates and `previous_digest`, so an altered or missing trace breaks a named link.
    """

    # set before the insert (not auto_now_add) so that the chain digest can cover it
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="traces")
    frame_version = models.PositiveIntegerField(help_text="FrameVersion.number of the project")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, null=True, blank=True, related_name="traces")
    condition = models.CharField(max_length=8, db_index=True)
    query = models.TextField()
    standpoint = models.DateTimeField(null=True, blank=True)
    budget_tokens = models.PositiveIntegerField()
    # the memory sequence of the corpus the selection saw (null: written before memory had one)
    memory_sequence = models.PositiveBigIntegerField(null=True, blank=True)
    policy_version = models.CharField(max_length=100)
    engine_version = models.CharField(max_length=100)
    bundle_digest = models.CharField(max_length=64, db_index=True)
    bundle_tokens = models.PositiveIntegerField()
    admitted = ArrayField(models.CharField(max_length=200), default=list)
    # header: project frame snapshot, work frame, retriever configuration, stage summaries
    header = models.JSONField(default=dict)
    bundle = models.JSONField(default=dict)
    source = models.CharField(max_length=30, default="select", help_text="select | evaluation | backtest | api")
    chain_position = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="1, 2, ... within the project; null: written before the chain"
    )
    previous_digest = models.CharField(max_length=64, blank=True)
    digest = models.CharField(max_length=64, blank=True)
    # set when the retention policy removed the payload (a TraceTombstone of kind "expired" says how)
    expired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "frame_version", "-created_at"])]
        constraints = [
            models.UniqueConstraint(fields=["project", "chain_position"], name="trace_chain_position_unique"),
        ]


class TombstoneKind(models.TextChoices):
    EXPIRED = "expired"  # the retention policy removed the payload
    ERASED = "erased"  # a lead erased one unit's text


class TraceTombstone(models.Model):
    """One change a trace underwent after it was written; appended, never edited (a trigger).

    The trace keeps its digest and its link. `content_before` is the trace's content digest
    (selection.traces.chain.content_digest) before the change, `content_after` after it: verification
    checks the first against the chain digest and the last against the trace as it is now, so an
    erased or expired trace reads "chain intact" and a trace altered afterwards reads altered.
    """

    trace = models.ForeignKey("Trace", on_delete=models.PROTECT, related_name="tombstones")
    sequence = models.PositiveIntegerField(help_text="1, 2, ... within the trace")
    kind = models.CharField(max_length=10, choices=TombstoneKind.choices)
    content_before = models.CharField(max_length=64)
    content_after = models.CharField(max_length=64)
    unit_uid = models.CharField(max_length=200, blank=True, help_text="the erased unit")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    actor_label = models.CharField(max_length=150)
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["trace_id", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["trace", "sequence"], name="trace_tombstone_sequence"),
        ]

    def __str__(self) -> str:
        what = f"{self.unit_uid} erased" if self.kind == TombstoneKind.ERASED else "expired"
        return f"{what} by {self.actor_label} at {self.created_at:%Y-%m-%d %H:%M} UTC: {self.reason}"


class RetentionOrigin(models.TextChoices):
    """Retention groups traces by where they came from (Trace.source)."""

    EVALUATION = "evaluation"
    BACKTEST = "backtest"
    LIVE = "live"  # select, api, mcp, replay: every other source


class RetentionPolicy(models.Model):
    """How many days each origin's traces of a project keep their payload (null: for ever).

    A project setting, changed only by a lead through selection.traces.retention.retention_policy_set
    (audited), not a frame field: it changes no selection, so a backtest could say nothing of it.
    """

    project = models.OneToOneField(Project, on_delete=models.PROTECT, related_name="retention")
    evaluation_days = models.PositiveIntegerField(null=True, blank=True)
    backtest_days = models.PositiveIntegerField(null=True, blank=True)
    live_days = models.PositiveIntegerField(null=True, blank=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    def days(self) -> dict[str, int | None]:
        return {
            RetentionOrigin.EVALUATION: self.evaluation_days,
            RetentionOrigin.BACKTEST: self.backtest_days,
            RetentionOrigin.LIVE: self.live_days,
        }


class JSONTextField(models.JSONField):
    """A JSONField stored as PostgreSQL `json` rather than `jsonb`: the text is kept as written and
    only checked for syntax, where jsonb parses every value into its binary form. Trace candidates
    are written by the thousand (a backtest chunk COPYs ~750 records) and read back whole, never
    searched inside, so the parse was pure cost (about half of PostgreSQL's time on a replay's
    COPY). `->` lookups still work on json; psycopg decodes a json column itself."""

    def db_type(self, connection):
        return "json"

    def from_db_value(self, value, expression, connection):
        if value is not None and not isinstance(value, str):
            return value  # already decoded by psycopg's json loader
        return super().from_db_value(value, expression, connection)


class TraceCandidate(models.Model):
    """One candidate's full record in a trace: admitted or not, it carries every signal."""

    trace = models.ForeignKey(Trace, on_delete=models.PROTECT, related_name="candidates")
    position = models.PositiveIntegerField()
    unit_uid = models.CharField(max_length=200, db_index=True)
    project_slug = models.CharField(max_length=100)
    evidence_class = models.CharField(max_length=100)
    disposition = models.CharField(max_length=30, db_index=True)
    stage = models.CharField(max_length=30)
    reason_code = models.CharField(max_length=60, db_index=True)
    record = JSONTextField(default=dict, help_text="retrieval, signals, eligibility, budget state")

    class Meta:
        ordering = ["trace_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["trace", "position"], name="trace_candidate_position"),
        ]


class OutcomeVerdict(models.TextChoices):
    HELPED = "helped"
    PARTIAL = "partial"
    MISSED = "missed"  # the bundle lacked what the work needed
    HARMFUL = "harmful"  # the bundle misled the work
    FAILED = "failed"  # the answer failed although the evidence was present (E6)


class TraceOutcome(models.Model):
    """What an agent reports of a bundle after using it; appended, never edited."""

    trace = models.ForeignKey(Trace, on_delete=models.PROTECT, related_name="outcomes")
    reporter = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    verdict = models.CharField(max_length=10, choices=OutcomeVerdict.choices)
    note = models.TextField(blank=True)
    missing_units = models.JSONField(default=list, blank=True, help_text="unit ids the work needed and lacked")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
