"""Retention policies, trace tombstones (append-only), and triggers that let exactly the tombstoning
changes through (authority.db.append_only_but_tombstones)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

from authority.db import append_only, append_only_but_tombstones

# what a tombstone never changes: identity, chain link, and the facts of the selection
TRACE_IMMUTABLE = (
    "id", "project_id", "chain_position", "previous_digest", "digest", "created_at", "task_id",
    "frame_version", "condition", "source", "standpoint", "budget_tokens", "policy_version",
    "engine_version", "bundle_digest", "bundle_tokens",
)  # fmt: skip


class Migration(migrations.Migration):

    dependencies = [
        ('selection', '0006_routing_task_inputs_local_units'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='corpus',
            name='revision',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='trace',
            name='expired_at',
            field=models.DateTimeField(blank=True, null=True),
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
                'constraints': [models.UniqueConstraint(fields=('trace', 'sequence'), name='trace_tombstone_sequence')],
            },
        ),
        append_only("selection_tracetombstone"),
        append_only_but_tombstones(
            "selection_trace",
            tombstones="selection_tracetombstone",
            trace_column="id",
            immutable=TRACE_IMMUTABLE,
            allow="UPDATE",
        ),
        append_only_but_tombstones(
            "selection_tracecandidate",
            tombstones="selection_tracetombstone",
            trace_column="trace_id",
            immutable=(),
            allow="DELETE",
        ),
    ]
