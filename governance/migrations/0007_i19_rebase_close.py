"""Rebase, rollback and close (issue 19): a proposal names the one it supersedes and the version it
restores; a closure is append-only; the proposal guard also keeps the new columns fixed."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from authority.db import append_only

GUARD = """
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
"""


class Migration(migrations.Migration):

    dependencies = [
        ('authority', '0001_initial'),
        ('governance', '0006_merge_0005_api_tokens_0005_proposal_immutable'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='proposal',
            name='kind',
            field=models.CharField(choices=[('change', 'Change'), ('rebase', 'Rebase'), ('rollback', 'Rollback')], default='change', max_length=10),
        ),
        migrations.AddField(
            model_name='proposal',
            name='restores',
            field=models.ForeignKey(blank=True, help_text='the earlier version a rollback restores', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='authority.frameversion'),
        ),
        migrations.AddField(
            model_name='proposal',
            name='supersedes',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='superseded_by', to='governance.proposal'),
        ),
        migrations.AlterField(
            model_name='proposal',
            name='state',
            field=models.CharField(choices=[('proposed', 'Proposed'), ('backtesting', 'Backtesting'), ('passed', 'Passed'), ('failed', 'Failed'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('promoted', 'Promoted'), ('closed', 'Closed')], default='proposed', max_length=12),
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
        ),
        migrations.RunSQL(GUARD, reverse_sql=migrations.RunSQL.noop),
        append_only("governance_proposalclosure"),
        migrations.AddConstraint(
            model_name="proposalclosure",
            constraint=models.CheckConstraint(
                condition=~models.Q(reason=""), name="proposal_closure_has_reason"
            ),
        ),
    ]
