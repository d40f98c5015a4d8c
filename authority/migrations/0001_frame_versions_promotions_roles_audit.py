"""Frame versions, promotions, role grants and audit entries (tables named governance_*, renamed
by 0002), and the triggers that keep versions, promotions and audit entries append-only."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from authority.db import append_only


class Migration(migrations.Migration):

    initial = True

    replaces = [("authority", "0001_initial")]

    dependencies = [
        ("selection", "0001_memory_tasks_traces_evaluations"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AuditEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('actor_label', models.CharField(max_length=150)),
                ('action', models.CharField(db_index=True, max_length=50)),
                ('object_type', models.CharField(max_length=50)),
                ('object_id', models.CharField(max_length=100)),
                ('summary', models.TextField(blank=True)),
                ('payload', models.JSONField(default=dict)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='audit_entries', to='selection.project')),
            ],
            options={
                'verbose_name_plural': 'audit entries',
                'db_table': 'governance_auditentry',
                'ordering': ['-at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='FrameVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('snapshot', models.JSONField()),
                ('author_label', models.CharField(help_text='who wrote it, as shown (import, a username)', max_length=150)),
                ('origin', models.CharField(default='proposal', help_text='import | proposal', max_length=20)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('parent', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='children', to='authority.frameversion')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='frame_versions', to='selection.project')),
            ],
            options={
                'db_table': 'governance_frameversion',
                'ordering': ['project_id', 'number'],
            },
        ),
        migrations.CreateModel(
            name='Promotion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('sequence', models.PositiveIntegerField()),
                ('promoted_at', models.DateTimeField(auto_now_add=True)),
                ('frame_version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='promotions', to='authority.frameversion')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='promotions', to='selection.project')),
                ('promoted_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'governance_promotion',
                'ordering': ['project_id', 'sequence'],
            },
        ),
        migrations.CreateModel(
            name='RoleGrant',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(choices=[('lead', 'Project lead'), ('reviewer', 'Reviewer'), ('auditor', 'Auditor')], max_length=10)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='role_grants', to='selection.project')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='role_grants', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'governance_rolegrant',
            },
        ),
        migrations.AddConstraint(
            model_name='frameversion',
            constraint=models.UniqueConstraint(fields=('project', 'number'), name='frame_version_number_unique'),
        ),
        migrations.AddConstraint(
            model_name='promotion',
            constraint=models.UniqueConstraint(fields=('project', 'sequence'), name='promotion_sequence_unique'),
        ),
        migrations.AddConstraint(
            model_name='rolegrant',
            constraint=models.UniqueConstraint(fields=('user', 'project', 'role'), name='role_grant_unique'),
        ),
        append_only("governance_frameversion"),
        append_only("governance_promotion"),
        append_only("governance_auditentry"),
    ]
