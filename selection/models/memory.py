"""Memory as stored: corpora, projects, units, links, tasks and their hidden ledgers, local overlays.

No unit stores an importance, priority or weight: importance is computed against a frame at
selection time and written to the trace (tests/test_foundation.py enforces it).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from pgvector.django import VectorField

IDENTIFIER_HELP = "matches [a-z0-9][a-z0-9_.-]*"


class Corpus(models.Model):
    name = models.SlugField(max_length=100, unique=True, help_text=IDENTIFIER_HELP)
    description = models.TextField(blank=True)
    standpoint = models.DateTimeField(null=True, blank=True)
    imported_at = models.DateTimeField(auto_now_add=True)
    embedding_model = models.CharField(max_length=200, blank=True)
    extras = models.JSONField(default=dict, blank=True)
    # bumped by every change to a unit after import (an erasure): each process's cached engine
    # index of the corpus is rebuilt when it sees a new revision
    revision = models.PositiveIntegerField(default=0)
    # the memory sequence: the greatest MemoryChange.sequence of the corpus (transaction time)
    sequence = models.PositiveBigIntegerField(db_default=0)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "corpora"

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    corpus = models.ForeignKey(Corpus, on_delete=models.PROTECT, related_name="projects")
    slug = models.SlugField(max_length=100, unique=True, help_text=IDENTIFIER_HELP)
    name = models.CharField(max_length=200)
    position = models.PositiveIntegerField(default=0)
    extras = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["corpus__name", "position", "slug"]

    def __str__(self) -> str:
        return self.slug


class OpenLoopStatus(models.TextChoices):
    OPEN = "open"
    CLOSED = "closed"


class OpenLoopKind(models.TextChoices):
    TODO = "todo"
    QUESTION = "question"
    EXPECTATION = "expectation"


class UnitStatus(models.TextChoices):
    ACTIVE = "active"  # selectable
    CANDIDATE = "candidate"  # written under candidate admission: never selected until admitted
    DECLINED = "declined"  # a candidate a reviewer declined: never selected


class MemoryUnit(models.Model):
    corpus = models.ForeignKey(Corpus, on_delete=models.PROTECT, related_name="units")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="units")
    uid = models.CharField("id", max_length=200, help_text=IDENTIFIER_HELP)
    position = models.PositiveIntegerField(default=0, help_text="line in units.jsonl")
    evidence_class = models.CharField(max_length=100, db_index=True)
    title = models.CharField(max_length=300, blank=True)
    text = models.TextField()
    tokens = models.PositiveIntegerField(help_text="ceil(len(text) / 4)")
    created_at = models.DateTimeField(null=True, blank=True, help_text="when it was recorded")
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    open_loop_status = models.CharField(max_length=10, choices=OpenLoopStatus.choices, blank=True)
    open_loop_kind = models.CharField(max_length=12, choices=OpenLoopKind.choices, blank=True)
    paths = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    subject = models.CharField(max_length=200, blank=True)
    facet = models.CharField(max_length=200, blank=True)
    root = models.BooleanField(default=False)
    # the dimension follows the model (384 for all-MiniLM-L6-v2, 1024 for bge-m3); the HNSW
    # index in migration 0002 covers the default dimension
    embedding = VectorField(null=True, blank=True)
    extras = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=UnitStatus.choices, db_default=UnitStatus.ACTIVE)
    # transaction time: the sequence of the change that created the unit, and of its latest change
    created_sequence = models.PositiveBigIntegerField(db_default=0)
    sequence = models.PositiveBigIntegerField(db_default=0)
    recorded_at = models.DateTimeField(null=True, blank=True, help_text="when the server stored it")

    class Meta:
        ordering = ["corpus_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["corpus", "uid"], name="unit_uid_unique_in_corpus"),
        ]
        indexes = [models.Index(fields=["project", "evidence_class"])]

    def __str__(self) -> str:
        return self.uid


class LinkKind(models.TextChoices):
    SUPERSEDES = "supersedes"
    ECHO_OF = "echo_of"
    SUPPORTS = "supports"
    REFUTES = "refutes"


class UnitLink(models.Model):
    source = models.ForeignKey(MemoryUnit, on_delete=models.PROTECT, related_name="links_out")
    target = models.ForeignKey(MemoryUnit, on_delete=models.PROTECT, related_name="links_in")
    kind = models.CharField(max_length=12, choices=LinkKind.choices)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["source_id", "kind", "position"]
        constraints = [
            models.UniqueConstraint(fields=["source", "target", "kind"], name="unit_link_unique"),
            models.CheckConstraint(condition=~models.Q(source=models.F("target")), name="unit_link_not_self"),
        ]


class MemoryChangeKind(models.TextChoices):
    CREATED = "created"  # a unit written (an import, a write, the new unit of a supersession)
    CHANGED = "changed"  # a unit's fields changed (validity closed, open loop closed or reopened)
    LINKED = "linked"  # a link from the unit added (supersedes, echo_of, supports, refutes)
    ADMITTED = "admitted"  # a candidate admitted
    DECLINED = "declined"  # a candidate declined
    ERASED = "erased"  # text and title removed; the unit's existence and links stay


class MemoryChange(models.Model):
    """One change of a corpus's memory, append-only: the corpus's memory sequence.

    `sequence` is per corpus, strictly increasing in commit order: it is assigned under a lock of
    the corpus row (selection.memory.changes.memory_changes_append), so a reader that has seen
    sequence N has seen every change up to N. `state` is the unit's record after the change (the
    units.jsonl fields, links included; text and title blank once erased), so memory as of any
    sequence is the latest state of each unit at or below it.
    """

    corpus = models.ForeignKey(Corpus, on_delete=models.PROTECT, related_name="changes")
    sequence = models.PositiveBigIntegerField()
    recorded_at = models.DateTimeField()
    unit = models.ForeignKey(MemoryUnit, on_delete=models.PROTECT, related_name="changes")
    kind = models.CharField(max_length=10, choices=MemoryChangeKind.choices)
    state = models.JSONField(default=dict)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    via = models.CharField(max_length=20, help_text="import, api, mcp, page, command")
    batch = models.CharField(max_length=200, blank=True, help_text="the import or request it came in")

    class Meta:
        ordering = ["corpus_id", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["corpus", "sequence"], name="memory_change_sequence_unique"),
        ]
        indexes = [models.Index(fields=["unit", "sequence"])]


class Task(models.Model):
    corpus = models.ForeignKey(Corpus, on_delete=models.PROTECT, related_name="tasks")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="tasks")
    uid = models.CharField("id", max_length=200)
    position = models.PositiveIntegerField(default=0)
    family = models.CharField(max_length=100, blank=True)
    pair = models.CharField(max_length=100, blank=True)
    query = models.TextField()
    standpoint = models.DateTimeField(null=True, blank=True)
    budget_tokens = models.PositiveIntegerField()
    # the declared WorkFrame: objective, work_type, constraints, cites
    frame = models.JSONField(default=dict)
    misassigned_work_type = models.CharField(max_length=100, blank=True)
    # the tasks.yaml `routing:` block as written (corpus format 1.1); null when the task has none
    routing = models.JSONField(null=True, blank=True)
    extras = models.JSONField(default=dict, blank=True)
    # the memory sequence the task was made at (labelled from a trace, or imported); null: as of now
    memory_sequence = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["corpus_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["corpus", "uid"], name="task_uid_unique_in_corpus"),
        ]

    def __str__(self) -> str:
        return self.uid


class TaskSignal(models.Model):
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="signals")
    uid = models.CharField("id", max_length=200)
    kind = models.CharField(max_length=30)
    content = models.TextField()
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["task_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["task", "uid"], name="signal_uid_unique_in_task"),
        ]


class LedgerLabel(models.TextChoices):
    MUST = "MUST"
    SHOULD = "SHOULD"
    OPTIONAL = "OPTIONAL"
    DISTRACTOR = "DISTRACTOR"
    HARMFUL = "HARMFUL"


class LedgerEntry(models.Model):
    """A hidden label: read only by scoring code (selection.evaluation.scoring), never by selection code."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="ledger_entries")
    unit = models.ForeignKey(MemoryUnit, on_delete=models.PROTECT, related_name="+")
    label = models.CharField(max_length=10, choices=LedgerLabel.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "unit"], name="ledger_entry_unique"),
        ]


class LocalUnit(models.Model):
    """A private memory unit of one user in one project (a local overlay: tone, local tools).

    Stored apart from the shared corpus and never exported with it. It may add context; it never
    overrides or suppresses shared memory (selection.engine.routing.route.judge_local).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="local_units")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="local_units")
    uid = models.CharField("id", max_length=200, help_text=IDENTIFIER_HELP)
    evidence_class = models.CharField(max_length=100, default="preference")
    title = models.CharField(max_length=300, blank=True)
    text = models.TextField()
    subject = models.CharField(max_length=200, blank=True)
    facet = models.CharField(max_length=200, blank=True)
    supersedes = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "user", "uid"]
        constraints = [
            models.UniqueConstraint(fields=["user", "project", "uid"], name="local_unit_uid_unique_per_user_project"),
        ]

    def __str__(self) -> str:
        return f"{self.user}:{self.project.slug}:{self.uid}"
