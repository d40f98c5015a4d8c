from django.db import migrations

from authority.db import append_only


class Migration(migrations.Migration):
    dependencies = [("backtest", "0002_initial")]

    operations = [
        append_only("backtest_taskreplay"),
        append_only("backtest_backtestdecision"),
        append_only("backtest_approval"),
    ]
