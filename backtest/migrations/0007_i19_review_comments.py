"""Review discussion (issue 19): comments on a proposal or one task row of its backtest, append-only."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from authority.db import append_only


class Migration(migrations.Migration):

    dependencies = [
        ('backtest', '0006_backtest_immutable'),
        ('governance', '0006_merge_0005_api_tokens_0005_proposal_immutable'),
        ('selection', '0006_routing_task_inputs_local_units'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
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
        append_only("backtest_reviewcomment"),
    ]
