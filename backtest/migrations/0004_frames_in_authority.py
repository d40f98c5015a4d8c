"""Frame versions now live in the authority app (same table): repoint the state of the FKs."""

import django.db.models.deletion
from django.db import migrations, models


def _fk(related_name):
    return models.ForeignKey(
        on_delete=django.db.models.deletion.PROTECT, related_name=related_name, to="authority.frameversion"
    )


class Migration(migrations.Migration):

    dependencies = [
        ("backtest", "0003_append_only"),
        ("authority", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(model_name="backtest", name="baseline_version", field=_fk("+")),
                migrations.AlterField(model_name="backtest", name="candidate_version", field=_fk("+")),
                migrations.AlterField(model_name="approval", name="frame_version", field=_fk("+")),
            ],
        ),
    ]
