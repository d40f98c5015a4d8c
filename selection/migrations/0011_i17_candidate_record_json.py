"""Trace candidates' records stored as json, not jsonb (issue 17: the jsonb parse was about half of
PostgreSQL's time on a backtest chunk's COPY). Existing rows are converted in place by the
jsonb -> json cast and read back as the same values, so their chain digests still verify."""

from django.db import migrations

import selection.models


class Migration(migrations.Migration):
    dependencies = [
        ("selection", "0010_i19_evaluation_task_set_versions"),
    ]

    operations = [
        migrations.AlterField(
            model_name="tracecandidate",
            name="record",
            field=selection.models.JSONTextField(
                default=dict, help_text="retrieval, signals, eligibility, budget state"
            ),
        ),
    ]
