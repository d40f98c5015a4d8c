"""Evaluations as stored: evaluations and their runs, jobs, task set versions, labellings."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from selection.models.memory import Corpus, Project, Task
from selection.models.traces import Trace


class Evaluation(models.Model):
    corpus = models.ForeignKey(Corpus, on_delete=models.PROTECT, related_name="evaluations")
    created_at = models.DateTimeField(auto_now_add=True)
    engine_version = models.CharField(max_length=100)
    conditions = ArrayField(models.CharField(max_length=8))
    result = models.JSONField(default=dict, help_text="the evaluate --json document")
    # the version of each project's task set the run replayed; none on a run that records none
    task_set_versions = models.ManyToManyField("TaskSetVersion", blank=True, related_name="evaluations")

    class Meta:
        ordering = ["-created_at", "-id"]


class EvaluationRun(models.Model):
    evaluation = models.ForeignKey(Evaluation, on_delete=models.PROTECT, related_name="runs")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    condition = models.CharField(max_length=8)
    variant = models.CharField(max_length=30, default="declared", help_text="declared | misassigned")
    trace = models.ForeignKey(Trace, on_delete=models.PROTECT, related_name="+")
    metrics = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "task", "condition", "variant"], name="evaluation_run_unique"
            ),
        ]


class JobKind(models.TextChoices):
    EVALUATION = "evaluation"
    IMPORT = "import"


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    ERROR = "error"


class Job(models.Model):
    """Long work run on a Celery worker (an evaluation, a corpus import), with its progress.

    The page and the API show `done`/`total` of `step` while it runs, then the result (the
    evaluation, the imported corpus) or the error with every issue.
    """

    kind = models.CharField(max_length=12, choices=JobKind.choices)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED)
    corpus = models.ForeignKey(Corpus, on_delete=models.PROTECT, null=True, blank=True, related_name="jobs")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    params = models.JSONField(default=dict, help_text="conditions; the staged corpus directory")
    step = models.CharField(max_length=20, blank=True)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    issues = models.JSONField(default=list, blank=True, help_text="each corpus issue, when an import is refused")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class TaskSetVersion(models.Model):
    """A numbered state of a project's task set (its tasks and ledgers, by digest): every change a
    person makes (a task labelled from a trace) adds one, and every backtest and evaluation names
    the version it ran on (recording it when its digest is new). Append-only (trigger). Version 1
    is the set as imported, recorded at the first change or the first run, whichever comes first."""

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="task_set_versions")
    number = models.PositiveIntegerField()
    digest = models.CharField(max_length=64, help_text="sha256 of the tasks and their ledgers")
    tasks = models.PositiveIntegerField(help_text="how many tasks the set holds")
    reason = models.TextField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["project", "number"], name="task_set_version_unique"),
        ]


class TaskLabelling(models.Model):
    """Who turned which trace into an evaluation task, and when: its labels are the task's ledger.
    Append-only (trigger); a trace is labelled once."""

    task = models.OneToOneField(Task, on_delete=models.PROTECT, related_name="labelling")
    trace = models.OneToOneField(Trace, on_delete=models.PROTECT, related_name="labelling")
    labelled_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    labelled_at = models.DateTimeField(auto_now_add=True)
    task_set_version = models.ForeignKey(TaskSetVersion, on_delete=models.PROTECT, related_name="+")
