from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("backtest", "0011_i17_replay_reuse_key"),
        ("backtest", "0012_merge_i19_health_task_set_version"),
    ]

    operations = []
