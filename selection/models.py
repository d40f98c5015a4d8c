"""Memory as stored: corpora, projects, units, links, tasks and their hidden ledgers, traces.

No unit stores an importance, priority or weight: importance is computed against a frame at
selection time and written to the trace (tests/selection/test_models.py enforces it).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone
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
            models.CheckConstraint(
                condition=~models.Q(source=models.F("target")), name="unit_link_not_self"
            ),
        ]


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
    """A hidden label: read only by scoring code (selection.scoring), never by selection code."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="ledger_entries")
    unit = models.ForeignKey(MemoryUnit, on_delete=models.PROTECT, related_name="+")
    label = models.CharField(max_length=10, choices=LedgerLabel.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "unit"], name="ledger_entry_unique"),
        ]


class Trace(models.Model):
    """A frozen ContextTrace with its bundle; immutable once written (a trigger enforces it).

    Each project's traces form a hash chain (selection.chain): `digest` covers this row, its
    candidates and `previous_digest`, so an altered or missing trace breaks a named link.
    """

    # set before the insert (not auto_now_add) so that the chain digest can cover it
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="traces")
    frame_version = models.PositiveIntegerField(help_text="FrameVersion.number of the project")
    task = models.ForeignKey(
        Task, on_delete=models.PROTECT, null=True, blank=True, related_name="traces"
    )
    condition = models.CharField(max_length=8, db_index=True)
    query = models.TextField()
    standpoint = models.DateTimeField(null=True, blank=True)
    budget_tokens = models.PositiveIntegerField()
    policy_version = models.CharField(max_length=100)
    engine_version = models.CharField(max_length=100)
    bundle_digest = models.CharField(max_length=64, db_index=True)
    bundle_tokens = models.PositiveIntegerField()
    admitted = ArrayField(models.CharField(max_length=200), default=list)
    # header: project frame snapshot, work frame, retriever configuration, stage summaries
    header = models.JSONField(default=dict)
    bundle = models.JSONField(default=dict)
    source = models.CharField(
        max_length=30, default="select", help_text="select | evaluation | backtest | api"
    )
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
            models.UniqueConstraint(
                fields=["project", "chain_position"], name="trace_chain_position_unique"
            ),
        ]


class TombstoneKind(models.TextChoices):
    EXPIRED = "expired"  # the retention policy removed the payload
    ERASED = "erased"  # a lead erased one unit's text


class TraceTombstone(models.Model):
    """One change a trace underwent after it was written; appended, never edited (a trigger).

    The trace keeps its digest and its link. `content_before` is the trace's content digest
    (selection.chain.content_digest) before the change, `content_after` after it: verification
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

    A project setting, changed only by a lead through selection.retention.retention_policy_set
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
    COPY, issue 17). `->` lookups still work on json; psycopg decodes a json column itself."""

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


class Evaluation(models.Model):
    corpus = models.ForeignKey(Corpus, on_delete=models.PROTECT, related_name="evaluations")
    created_at = models.DateTimeField(auto_now_add=True)
    engine_version = models.CharField(max_length=100)
    conditions = ArrayField(models.CharField(max_length=8))
    result = models.JSONField(default=dict, help_text="the evaluate --json document")
    # the version of each project's task set the run replayed (issue 19); none on a run made
    # before versions were recorded
    task_set_versions = models.ManyToManyField("TaskSetVersion", blank=True, related_name="evaluations")

    class Meta:
        ordering = ["-created_at", "-id"]


class EvaluationRun(models.Model):
    evaluation = models.ForeignKey(Evaluation, on_delete=models.PROTECT, related_name="runs")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    condition = models.CharField(max_length=8)
    variant = models.CharField(
        max_length=30, default="declared", help_text="declared | misassigned"
    )
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
class LocalUnit(models.Model):
    """A private memory unit of one user in one project (a local overlay: tone, local tools).

    Stored apart from the shared corpus and never exported with it. It may add context; it never
    overrides or suppresses shared memory (selection.engine.routing.route.judge_local).
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="local_units"
    )
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
            models.UniqueConstraint(
                fields=["user", "project", "uid"], name="local_unit_uid_unique_per_user_project"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user}:{self.project.slug}:{self.uid}"


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
