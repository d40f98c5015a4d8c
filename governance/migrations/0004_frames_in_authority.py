"""Frame versions, promotions, role grants and audit entries are authority's now (same tables):
governance keeps proposals, whose FKs point at authority.FrameVersion. No database change."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("governance", "0003_proposal"),
        ("authority", "0001_initial"),
        ("backtest", "0004_frames_in_authority"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name="proposal",
                    name="base_version",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="+", to="authority.frameversion"
                    ),
                ),
                migrations.AlterField(
                    model_name="proposal",
                    name="frame_version",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="proposal",
                        to="authority.frameversion",
                    ),
                ),
                migrations.DeleteModel(name="AuditEntry"),
                migrations.DeleteModel(name="RoleGrant"),
                migrations.DeleteModel(name="Promotion"),
                migrations.DeleteModel(name="FrameVersion"),
            ],
        ),
    ]
