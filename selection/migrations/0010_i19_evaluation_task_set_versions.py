"""An evaluation names the version of each project's task set it replayed (issue 19)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('selection', '0009_merge_0007_i19_task_sets_0008_merge_i14_i15'),
    ]

    operations = [
        migrations.AddField(
            model_name='evaluation',
            name='task_set_versions',
            field=models.ManyToManyField(blank=True, related_name='evaluations', to='selection.tasksetversion'),
        ),
    ]
