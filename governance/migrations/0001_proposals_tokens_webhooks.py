"""Proposals and their closures, API tokens, webhook endpoints and deliveries; the trigger that
keeps a submitted proposal fixed but for its state, and closures append-only."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from authority.db import append_only

PROPOSAL_GUARD = """
CREATE OR REPLACE FUNCTION governance_proposal_guard() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'proposals are kept: DELETE of proposal % refused', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.patch IS DISTINCT FROM OLD.patch
        OR NEW.base_version_id IS DISTINCT FROM OLD.base_version_id
        OR NEW.frame_version_id IS DISTINCT FROM OLD.frame_version_id
        OR NEW.project_id IS DISTINCT FROM OLD.project_id
        OR NEW.author_id IS DISTINCT FROM OLD.author_id
        OR NEW.title IS DISTINCT FROM OLD.title
        OR NEW.rationale IS DISTINCT FROM OLD.rationale
        OR NEW.uid IS DISTINCT FROM OLD.uid
        OR NEW.kind IS DISTINCT FROM OLD.kind
        OR NEW.supersedes_id IS DISTINCT FROM OLD.supersedes_id
        OR NEW.restores_id IS DISTINCT FROM OLD.restores_id
        OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'proposal %: a submitted proposal is immutable (only its state moves)', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER governance_proposal_guard BEFORE UPDATE OR DELETE ON governance_proposal
    FOR EACH ROW EXECUTE FUNCTION governance_proposal_guard();
"""


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("governance", "0001_initial"),
        ("governance", "0002_append_only"),
        ("governance", "0003_proposal"),
        ("governance", "0004_frames_in_authority"),
        ("governance", "0005_api_tokens"),
        ("governance", "0005_proposal_immutable"),
        ("governance", "0006_merge_0005_api_tokens_0005_proposal_immutable"),
        ("governance", "0007_i19_rebase_close"),
        ("governance", "0008_i19_webhooks"),
    ]

    dependencies = [
        ("authority", "0001_frame_versions_promotions_roles_audit"),
        ("selection", "0001_memory_tasks_traces_evaluations"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Proposal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('uid', models.CharField(blank=True, help_text='the id in proposals.yaml, when imported', max_length=200)),
                ('title', models.CharField(max_length=300)),
                ('rationale', models.TextField(blank=True)),
                ('patch', models.JSONField()),
                ('warnings', models.JSONField(blank=True, default=list)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('state', models.CharField(choices=[('proposed', 'Proposed'), ('backtesting', 'Backtesting'), ('passed', 'Passed'), ('failed', 'Failed'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('promoted', 'Promoted'), ('closed', 'Closed')], default='proposed', max_length=12)),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('base_version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='authority.frameversion')),
                ('frame_version', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='proposal', to='authority.frameversion')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='proposals', to='selection.project')),
                ('kind', models.CharField(choices=[('change', 'Change'), ('rebase', 'Rebase'), ('rollback', 'Rollback')], default='change', max_length=10)),
                ('restores', models.ForeignKey(blank=True, help_text='the earlier version a rollback restores', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='authority.frameversion')),
                ('supersedes', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='superseded_by', to='governance.proposal')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='WebhookEndpoint',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('url', models.URLField(max_length=500)),
                ('secret', models.CharField(max_length=64)),
                ('events', models.JSONField(help_text='the event names it receives')),
                ('active', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='webhooks', to='selection.project')),
            ],
            options={
                'ordering': ['project_id', 'id'],
            },
        ),
        migrations.CreateModel(
            name='WebhookDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event', models.CharField(max_length=50)),
                ('payload', models.JSONField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('delivered', 'Delivered'), ('failed', 'Failed')], default='pending', max_length=10)),
                ('attempts', models.PositiveSmallIntegerField(default=0)),
                ('last_status_code', models.PositiveSmallIntegerField(blank=True, null=True)),
                ('last_error', models.TextField(blank=True)),
                ('delivered_at', models.DateTimeField(blank=True, null=True)),
                ('endpoint', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='deliveries', to='governance.webhookendpoint')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100)),
                ('prefix', models.CharField(help_text='the visible start of the token', max_length=16, unique=True)),
                ('digest', models.CharField(help_text='sha256 of the whole token', max_length=64, unique=True)),
                ('role', models.CharField(blank=True, choices=[('lead', 'Project lead'), ('reviewer', 'Reviewer'), ('auditor', 'Auditor')], max_length=10)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('expires_at', models.DateTimeField()),
                ('last_used_at', models.DateTimeField(blank=True, null=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='selection.project')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('project__isnull', True), ('role', '')), models.Q(('project__isnull', False), models.Q(('role', ''), _negated=True)), _connector='OR'), name='api_token_scope_whole')],
            },
        ),
        migrations.CreateModel(
            name='ProposalClosure',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('reason', models.TextField()),
                ('closed_at', models.DateTimeField(auto_now_add=True)),
                ('closed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('proposal', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='closure', to='governance.proposal')),
                ('superseded_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='governance.proposal')),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='proposal_closure_has_reason')],
            },
        ),
        migrations.RunSQL(
            PROPOSAL_GUARD,
            reverse_sql="""
            DROP TRIGGER IF EXISTS governance_proposal_guard ON governance_proposal;
            DROP FUNCTION IF EXISTS governance_proposal_guard();
            """,
        ),
        append_only("governance_proposalclosure"),
    ]
