"""Backtests: a proposal's FrameVersion replayed over every task of its project, against gates.

Replays, decisions and approvals are append-only (triggers in migration 0002); a Backtest row
only moves its status forward.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class BacktestStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    ERROR = "error"


class Backtest(models.Model):
    proposal = models.ForeignKey("governance.Proposal", on_delete=models.PROTECT, related_name="backtests")
    baseline_version = models.ForeignKey("authority.FrameVersion", on_delete=models.PROTECT, related_name="+")
    candidate_version = models.ForeignKey("authority.FrameVersion", on_delete=models.PROTECT, related_name="+")
    condition = models.CharField(max_length=8, default="C6")
    task_ids = models.JSONField(help_text="Task primary keys replayed, in order")
    task_set_digest = models.CharField(max_length=64)
    # the numbered version of the project's task set it replayed; null where none was recorded
    task_set_version = models.ForeignKey(
        "selection.TaskSetVersion", on_delete=models.PROTECT, null=True, blank=True, related_name="backtests"
    )
    engine_version = models.CharField(max_length=100)
    gates = models.JSONField(help_text="the gates in force, copied from the baseline frame")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=10, choices=BacktestStatus.choices, default=BacktestStatus.QUEUED)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # the proposal's patch taken apart (rules.ablation): {"parts": [field path, ...],
    # "variants": [[part, ...], ...] (each replayed as one more side), "note": why none}
    ablation = models.JSONField(default=dict, blank=True)
    # recorded live selections replayed under both versions (shadow replay): {"requested": N,
    # "traces": [trace id, ...] newest first, "note": what could not be replayed}
    shadow = models.JSONField(default=dict, blank=True)
    # False: each task is replayed against memory as of the sequence it was made at (a labelled
    # task's; a task without one, as of now); True: every task against memory as of now
    memory_now = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["-created_at", "-id"]


class ReplaySide(models.TextChoices):
    BASELINE = "baseline"
    CANDIDATE = "candidate"


class TaskReplay(models.Model):
    """One task replayed under one frame version; replaying it again writes nothing new."""

    backtest = models.ForeignKey(Backtest, on_delete=models.PROTECT, related_name="replays")
    task = models.ForeignKey("selection.Task", on_delete=models.PROTECT, related_name="+")
    side = models.CharField(max_length=10, choices=ReplaySide.choices)
    trace = models.ForeignKey("selection.Trace", on_delete=models.PROTECT, related_name="+")
    metrics = models.JSONField()
    # a baseline replay's inputs (backtest.replay.reuse.baseline_key): a later backtest with the same key
    # names this replay's trace instead of selecting again; empty on the candidate side
    reuse_key = models.CharField(max_length=64, blank=True, default="", db_default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["backtest", "task", "side"], name="task_replay_once"),
        ]
        indexes = [
            models.Index(fields=["reuse_key"], name="task_replay_reuse_key", condition=models.Q(side="baseline")),
        ]


class AblationReplay(models.Model):
    """One task replayed under one variant of the proposal (some of its parts over its base):
    metrics only, no trace; replaying it again writes nothing new."""

    backtest = models.ForeignKey(Backtest, on_delete=models.PROTECT, related_name="ablation_replays")
    task = models.ForeignKey("selection.Task", on_delete=models.PROTECT, related_name="+")
    variant = models.PositiveSmallIntegerField(help_text="index into Backtest.ablation['variants']")
    metrics = models.JSONField()
    admitted = models.JSONField(default=list, help_text="the unit ids admitted, in bundle order")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["backtest", "task", "variant"], name="ablation_replay_once"),
        ]


class ShadowReplay(models.Model):
    """One recorded live selection (a trace the `select` command, the API or the MCP server wrote)
    replayed with its stored inputs under the backtest's baseline and candidate versions, once."""

    backtest = models.ForeignKey(Backtest, on_delete=models.PROTECT, related_name="shadow_replays")
    selection = models.ForeignKey("selection.Trace", on_delete=models.PROTECT, related_name="+")
    baseline_trace = models.ForeignKey(
        "selection.Trace", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    candidate_trace = models.ForeignKey(
        "selection.Trace", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    changed = models.BooleanField(null=True, help_text="the candidate's bundle differs from the baseline's")
    reproduced = models.BooleanField(null=True, help_text="the baseline replay gave the recorded bundle")
    entered = models.JSONField(default=list, help_text="units the candidate admits and the baseline does not")
    left = models.JSONField(default=list, help_text="units the baseline admits and the candidate does not")
    baseline_tokens = models.PositiveIntegerField(null=True)
    candidate_tokens = models.PositiveIntegerField(null=True)
    baseline_leakage = models.FloatField(null=True)
    candidate_leakage = models.FloatField(null=True)
    error = models.TextField(blank=True, help_text="why this selection could not be replayed")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["backtest", "selection"], name="shadow_replay_once"),
        ]


class BacktestDecision(models.Model):
    backtest = models.OneToOneField(Backtest, on_delete=models.PROTECT, related_name="decision")
    passed = models.BooleanField()
    primary_metric = models.CharField(max_length=40)
    baseline_means = models.JSONField()
    candidate_means = models.JSONField()
    gate_results = models.JSONField(help_text="[{gate, metric, baseline, candidate, passed, reason}]")
    per_task_deltas = models.JSONField()
    # one row per part of the proposal (rules.ablation.PartEffect.as_dict); empty without ablation
    ablation = models.JSONField(default=list, blank=True)
    decided_at = models.DateTimeField(auto_now_add=True)


class ApprovalVerdict(models.TextChoices):
    APPROVE = "approve"
    REJECT = "reject"


class Approval(models.Model):
    """A reviewer's verdict on one exact backtest: proposal version, task set, engine version.

    A backtest collects one verdict per reviewer; how many approvals a promotion needs is the
    project's approval policy (the frame's `approval` key). A new backtest starts from none.
    """

    backtest = models.ForeignKey(Backtest, on_delete=models.PROTECT, related_name="approvals")
    frame_version = models.ForeignKey("authority.FrameVersion", on_delete=models.PROTECT, related_name="+")
    task_set_digest = models.CharField(max_length=64)
    engine_version = models.CharField(max_length=100)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    verdict = models.CharField(max_length=8, choices=ApprovalVerdict.choices)
    comment = models.TextField()
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["decided_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["backtest", "reviewer"], name="approval_one_per_reviewer"),
        ]


class ReviewComment(models.Model):
    """One message of a proposal's review discussion, on the proposal or on one task row of one of
    its backtests. Append-only (trigger): a comment is never edited or deleted, only answered."""

    proposal = models.ForeignKey("governance.Proposal", on_delete=models.PROTECT, related_name="comments")
    backtest = models.ForeignKey(Backtest, on_delete=models.PROTECT, null=True, blank=True, related_name="comments")
    task = models.ForeignKey("selection.Task", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(task__isnull=True) | models.Q(backtest__isnull=False),
                name="review_comment_task_has_backtest",
            ),
        ]


class HealthTrigger(models.TextChoices):
    SCHEDULE = "schedule"  # the daily beat run
    IMPORT = "import"  # a corpus or memory import
    TASK_SET = "task-set"  # the project's task set changed (a labelled task)
    PROMOTION = "promotion"  # another frame version was promoted
    MANUAL = "manual"  # a lead or reviewer asked


class HealthTransition(models.TextChoices):
    NONE = ""
    ALERT = "alert"  # a declared gate that passed before fails now
    RECOVERED = "recovered"  # every gate passes again after an alert


class FrameHealth(models.Model):
    """One reading of a project's promoted frame on its task set (backtest.health): when, which
    frame version, task set and corpus revision, the primary and gate metrics and each gate's
    verdict against the frame's first reading. Append-only (trigger); one row per trigger key."""

    project = models.ForeignKey("selection.Project", on_delete=models.PROTECT, related_name="+")
    frame_version = models.ForeignKey("authority.FrameVersion", on_delete=models.PROTECT, related_name="+")
    task_set_digest = models.CharField(max_length=64)
    task_set_version = models.PositiveIntegerField(null=True, blank=True, help_text="None: as imported")
    tasks = models.PositiveIntegerField(help_text="how many tasks were replayed")
    corpus = models.ForeignKey("selection.Corpus", on_delete=models.PROTECT, related_name="+")
    corpus_revision = models.PositiveIntegerField()
    # the corpus's memory sequence the reading ran at (readings run as of now), and how many
    # memory changes were made since the project's previous reading (null: the first)
    memory_sequence = models.PositiveBigIntegerField(null=True, blank=True)
    memory_growth = models.PositiveBigIntegerField(null=True, blank=True)
    engine_version = models.CharField(max_length=100)
    condition = models.CharField(max_length=8, default="C6")
    trigger = models.CharField(max_length=10, choices=HealthTrigger.choices)
    trigger_key = models.CharField(max_length=100, help_text="what set it off: one reading per key")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    primary_metric = models.CharField(max_length=100)
    means = models.JSONField(help_text="metric -> mean over the tasks replayed")
    gate_results = models.JSONField(help_text="[{gate, metric, limit, reference, value, passed, reason, tasks}]")
    per_task = models.JSONField(help_text="task pk -> {uid, metrics}")
    passed = models.BooleanField()
    transition = models.CharField(max_length=10, choices=HealthTransition.choices, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "trigger_key"], name="frame_health_one_per_trigger"),
        ]
        indexes = [models.Index(fields=["project", "created_at"], name="frame_health_project_time")]
