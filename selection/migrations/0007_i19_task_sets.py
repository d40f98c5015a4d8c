"""Versioned task sets and tasks labelled from traces (issue 19 item 4), both append-only."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from authority.db import append_only


class Migration(migrations.Migration):

    dependencies = [
        ('selection', '0006_routing_task_inputs_local_units'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
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
        migrations.AddConstraint(
            model_name='tasksetversion',
            constraint=models.UniqueConstraint(fields=('project', 'number'), name='task_set_version_unique'),
        ),
        append_only("selection_tasksetversion"),
        append_only("selection_tasklabelling"),
    ]
