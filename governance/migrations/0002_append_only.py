from django.db import migrations

from authority.db import append_only


class Migration(migrations.Migration):
    dependencies = [("governance", "0001_initial")]

    operations = [
        append_only("governance_frameversion"),
        append_only("governance_promotion"),
        append_only("governance_auditentry"),
    ]
