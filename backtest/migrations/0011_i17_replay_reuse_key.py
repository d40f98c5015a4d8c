"""A baseline replay keeps the key of its inputs, so a later backtest of the same project with the
same baseline, task, corpus and code reuses it (issue 17, backtest.reuse)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("backtest", "0010_guard_ablation_shadow"),
    ]

    operations = [
        migrations.AddField(
            model_name="taskreplay",
            name="reuse_key",
            field=models.CharField(blank=True, db_default="", default="", max_length=64),
        ),
        migrations.AddIndex(
            model_name="taskreplay",
            index=models.Index(
                condition=models.Q(("side", "baseline")), fields=["reuse_key"], name="task_replay_reuse_key"
            ),
        ),
    ]
