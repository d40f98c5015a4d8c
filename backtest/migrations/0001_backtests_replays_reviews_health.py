"""Backtests with their task, ablation and shadow replays, decisions, four-eyes approvals, review
comments and frame health readings; the trigger that keeps a backtest's plan fixed and its status
moving forward, and the ones that keep replays, decisions, approvals, comments and readings
append-only."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from authority.db import append_only

BACKTEST_GUARD = """
CREATE OR REPLACE FUNCTION backtest_backtest_guard() RETURNS trigger AS $$
DECLARE
    ranks CONSTANT jsonb := '{"queued": 0, "running": 1, "finished": 2, "error": 2}';
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'backtest rows are kept: DELETE of backtest % refused', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF OLD.status IN ('finished', 'error') THEN
        RAISE EXCEPTION 'backtest % is %: its row is immutable', OLD.id, OLD.status
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.proposal_id IS DISTINCT FROM OLD.proposal_id
        OR NEW.baseline_version_id IS DISTINCT FROM OLD.baseline_version_id
        OR NEW.candidate_version_id IS DISTINCT FROM OLD.candidate_version_id
        OR NEW.condition IS DISTINCT FROM OLD.condition
        OR NEW.task_ids IS DISTINCT FROM OLD.task_ids
        OR NEW.task_set_digest IS DISTINCT FROM OLD.task_set_digest
        OR NEW.task_set_version_id IS DISTINCT FROM OLD.task_set_version_id
        OR NEW.engine_version IS DISTINCT FROM OLD.engine_version
        OR NEW.gates IS DISTINCT FROM OLD.gates
        OR NEW.ablation IS DISTINCT FROM OLD.ablation
        OR NEW.shadow IS DISTINCT FROM OLD.shadow
        OR NEW.requested_by_id IS DISTINCT FROM OLD.requested_by_id
        OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'backtest %: its versions, task set, digest, engine, gates, ablation plan and shadow plan never change', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF (ranks ->> NEW.status)::int < (ranks ->> OLD.status)::int THEN
        RAISE EXCEPTION 'backtest %: status moves forward only (% to % refused)', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER backtest_backtest_guard BEFORE UPDATE OR DELETE ON backtest_backtest
    FOR EACH ROW EXECUTE FUNCTION backtest_backtest_guard();
"""


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("backtest", "0001_initial"),
        ("backtest", "0002_initial"),
        ("backtest", "0003_append_only"),
        ("backtest", "0004_frames_in_authority"),
        ("backtest", "0005_four_eyes_approvals"),
        ("backtest", "0006_backtest_immutable"),
        ("backtest", "0007_i16_ablation"),
        ("backtest", "0007_i19_review_comments"),
        ("backtest", "0008_i16_shadow"),
        ("backtest", "0009_merge_0007_i19_review_comments_0008_i16_shadow"),
        ("backtest", "0010_guard_ablation_shadow"),
        ("backtest", "0011_i17_replay_reuse_key"),
        ("backtest", "0011_i19_backtest_task_set_version"),
        ("backtest", "0011_i19_health"),
        ("backtest", "0012_merge_i19_health_task_set_version"),
        ("backtest", "0013_merge_i17_replay_reuse_key"),
    ]

    dependencies = [
        ("authority", "0001_frame_versions_promotions_roles_audit"),
        ("governance", "0001_proposals_tokens_webhooks"),
        ("selection", "0001_memory_tasks_traces_evaluations"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Backtest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('condition', models.CharField(default='C6', max_length=8)),
                ('task_ids', models.JSONField(help_text='Task primary keys replayed, in order')),
                ('task_set_digest', models.CharField(max_length=64)),
                ('engine_version', models.CharField(max_length=100)),
                ('gates', models.JSONField(help_text='the gates in force, copied from the baseline frame')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('finished', 'Finished'), ('error', 'Error')], default='queued', max_length=10)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('error', models.TextField(blank=True)),
                ('baseline_version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='authority.frameversion')),
                ('candidate_version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='authority.frameversion')),
                ('proposal', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='backtests', to='governance.proposal')),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('ablation', models.JSONField(blank=True, default=dict)),
                ('shadow', models.JSONField(blank=True, default=dict)),
                ('task_set_version', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='backtests', to='selection.tasksetversion')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='BacktestDecision',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('passed', models.BooleanField()),
                ('primary_metric', models.CharField(max_length=40)),
                ('baseline_means', models.JSONField()),
                ('candidate_means', models.JSONField()),
                ('gate_results', models.JSONField(help_text='[{gate, metric, baseline, candidate, passed, reason}]')),
                ('per_task_deltas', models.JSONField()),
                ('decided_at', models.DateTimeField(auto_now_add=True)),
                ('backtest', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='decision', to='backtest.backtest')),
                ('ablation', models.JSONField(blank=True, default=list)),
            ],
        ),
        migrations.CreateModel(
            name='Approval',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('task_set_digest', models.CharField(max_length=64)),
                ('engine_version', models.CharField(max_length=100)),
                ('verdict', models.CharField(choices=[('approve', 'Approve'), ('reject', 'Reject')], max_length=8)),
                ('comment', models.TextField()),
                ('decided_at', models.DateTimeField(auto_now_add=True)),
                ('frame_version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='authority.frameversion')),
                ('reviewer', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('backtest', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='approvals', to='backtest.backtest')),
            ],
            options={
                'ordering': ['decided_at', 'id'],
                'constraints': [models.UniqueConstraint(fields=('backtest', 'reviewer'), name='approval_one_per_reviewer')],
            },
        ),
        migrations.CreateModel(
            name='AblationReplay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('variant', models.PositiveSmallIntegerField(help_text="index into Backtest.ablation['variants']")),
                ('metrics', models.JSONField()),
                ('admitted', models.JSONField(default=list, help_text='the unit ids admitted, in bundle order')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('backtest', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='ablation_replays', to='backtest.backtest')),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.task')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('backtest', 'task', 'variant'), name='ablation_replay_once')],
            },
        ),
        migrations.CreateModel(
            name='FrameHealth',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('task_set_digest', models.CharField(max_length=64)),
                ('task_set_version', models.PositiveIntegerField(blank=True, help_text='None: as imported', null=True)),
                ('tasks', models.PositiveIntegerField(help_text='how many tasks were replayed')),
                ('corpus_revision', models.PositiveIntegerField()),
                ('engine_version', models.CharField(max_length=100)),
                ('condition', models.CharField(default='C6', max_length=8)),
                ('trigger', models.CharField(choices=[('schedule', 'Schedule'), ('import', 'Import'), ('task-set', 'Task Set'), ('promotion', 'Promotion'), ('manual', 'Manual')], max_length=10)),
                ('trigger_key', models.CharField(help_text='what set it off: one reading per key', max_length=100)),
                ('primary_metric', models.CharField(max_length=100)),
                ('means', models.JSONField(help_text='metric -> mean over the tasks replayed')),
                ('gate_results', models.JSONField(help_text='[{gate, metric, limit, reference, value, passed, reason, tasks}]')),
                ('per_task', models.JSONField(help_text='task pk -> {uid, metrics}')),
                ('passed', models.BooleanField()),
                ('transition', models.CharField(blank=True, choices=[('', 'None'), ('alert', 'Alert'), ('recovered', 'Recovered')], default='', max_length=10)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('corpus', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.corpus')),
                ('frame_version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='authority.frameversion')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.project')),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['created_at', 'id'],
                'indexes': [models.Index(fields=['project', 'created_at'], name='frame_health_project_time')],
                'constraints': [models.UniqueConstraint(fields=('project', 'trigger_key'), name='frame_health_one_per_trigger')],
            },
        ),
        migrations.CreateModel(
            name='ReviewComment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('body', models.TextField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('author', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('backtest', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='comments', to='backtest.backtest')),
                ('proposal', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='comments', to='governance.proposal')),
                ('task', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.task')),
            ],
            options={
                'ordering': ['created_at', 'id'],
                'constraints': [models.CheckConstraint(condition=models.Q(('task__isnull', True), ('backtest__isnull', False), _connector='OR'), name='review_comment_task_has_backtest')],
            },
        ),
        migrations.CreateModel(
            name='ShadowReplay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('changed', models.BooleanField(help_text="the candidate's bundle differs from the baseline's", null=True)),
                ('reproduced', models.BooleanField(help_text='the baseline replay gave the recorded bundle', null=True)),
                ('entered', models.JSONField(default=list, help_text='units the candidate admits and the baseline does not')),
                ('left', models.JSONField(default=list, help_text='units the baseline admits and the candidate does not')),
                ('baseline_tokens', models.PositiveIntegerField(null=True)),
                ('candidate_tokens', models.PositiveIntegerField(null=True)),
                ('baseline_leakage', models.FloatField(null=True)),
                ('candidate_leakage', models.FloatField(null=True)),
                ('error', models.TextField(blank=True, help_text='why this selection could not be replayed')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('backtest', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='shadow_replays', to='backtest.backtest')),
                ('baseline_trace', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.trace')),
                ('candidate_trace', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.trace')),
                ('selection', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.trace')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('backtest', 'selection'), name='shadow_replay_once')],
            },
        ),
        migrations.CreateModel(
            name='TaskReplay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('side', models.CharField(choices=[('baseline', 'Baseline'), ('candidate', 'Candidate')], max_length=10)),
                ('metrics', models.JSONField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('backtest', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='replays', to='backtest.backtest')),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.task')),
                ('trace', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='selection.trace')),
                ('reuse_key', models.CharField(blank=True, db_default='', default='', max_length=64)),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('side', 'baseline')), fields=['reuse_key'], name='task_replay_reuse_key')],
                'constraints': [models.UniqueConstraint(fields=('backtest', 'task', 'side'), name='task_replay_once')],
            },
        ),
        migrations.RunSQL(
            BACKTEST_GUARD,
            reverse_sql="""
            DROP TRIGGER IF EXISTS backtest_backtest_guard ON backtest_backtest;
            DROP FUNCTION IF EXISTS backtest_backtest_guard();
            """,
        ),
        append_only("backtest_taskreplay"),
        append_only("backtest_backtestdecision"),
        append_only("backtest_approval"),
        append_only("backtest_ablationreplay"),
        append_only("backtest_shadowreplay"),
        append_only("backtest_reviewcomment"),
        append_only("backtest_framehealth"),
    ]
