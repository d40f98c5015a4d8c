"""A backtest names the numbered version of its project's task set it replayed (issue 19): a
nullable column (backtests made before versions were recorded keep their digest only, as their
rows are immutable), which the guard of 0010 now lists beside the digest: it never changes."""

import django.db.models.deletion
from django.db import migrations, models

GUARD = """
CREATE OR REPLACE FUNCTION backtest_backtest_guard() RETURNS trigger AS $$
DECLARE
    ranks CONSTANT jsonb := '{"queued": 0, "running": 1, "finished": 2, "error": 2}';
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'backtest rows are kept: DELETE of backtest % refused', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF OLD.status IN ('finished', 'error') THEN
        RAISE EXCEPTION 'backtest % is %: its row is immutable', OLD.id, OLD.status
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.proposal_id IS DISTINCT FROM OLD.proposal_id
        OR NEW.baseline_version_id IS DISTINCT FROM OLD.baseline_version_id
        OR NEW.candidate_version_id IS DISTINCT FROM OLD.candidate_version_id
        OR NEW.condition IS DISTINCT FROM OLD.condition
        OR NEW.task_ids IS DISTINCT FROM OLD.task_ids
        OR NEW.task_set_digest IS DISTINCT FROM OLD.task_set_digest
        OR NEW.task_set_version_id IS DISTINCT FROM OLD.task_set_version_id
        OR NEW.engine_version IS DISTINCT FROM OLD.engine_version
        OR NEW.gates IS DISTINCT FROM OLD.gates
        OR NEW.ablation IS DISTINCT FROM OLD.ablation
        OR NEW.shadow IS DISTINCT FROM OLD.shadow
        OR NEW.requested_by_id IS DISTINCT FROM OLD.requested_by_id
        OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'backtest %: its versions, task set, digest, engine, gates, ablation plan and shadow plan never change', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF (ranks ->> NEW.status)::int < (ranks ->> OLD.status)::int THEN
        RAISE EXCEPTION 'backtest %: status moves forward only (% to % refused)', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""

PREVIOUS = """
CREATE OR REPLACE FUNCTION backtest_backtest_guard() RETURNS trigger AS $$
DECLARE
    ranks CONSTANT jsonb := '{"queued": 0, "running": 1, "finished": 2, "error": 2}';
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'backtest rows are kept: DELETE of backtest % refused', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF OLD.status IN ('finished', 'error') THEN
        RAISE EXCEPTION 'backtest % is %: its row is immutable', OLD.id, OLD.status
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.proposal_id IS DISTINCT FROM OLD.proposal_id
        OR NEW.baseline_version_id IS DISTINCT FROM OLD.baseline_version_id
        OR NEW.candidate_version_id IS DISTINCT FROM OLD.candidate_version_id
        OR NEW.condition IS DISTINCT FROM OLD.condition
        OR NEW.task_ids IS DISTINCT FROM OLD.task_ids
        OR NEW.task_set_digest IS DISTINCT FROM OLD.task_set_digest
        OR NEW.engine_version IS DISTINCT FROM OLD.engine_version
        OR NEW.gates IS DISTINCT FROM OLD.gates
        OR NEW.ablation IS DISTINCT FROM OLD.ablation
        OR NEW.shadow IS DISTINCT FROM OLD.shadow
        OR NEW.requested_by_id IS DISTINCT FROM OLD.requested_by_id
        OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'backtest %: its versions, task set, digest, engine, gates, ablation plan and shadow plan never change', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF (ranks ->> NEW.status)::int < (ranks ->> OLD.status)::int THEN
        RAISE EXCEPTION 'backtest %: status moves forward only (% to % refused)', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('backtest', '0010_guard_ablation_shadow'),
        ('selection', '0009_merge_0007_i19_task_sets_0008_merge_i14_i15'),
    ]

    operations = [
        migrations.AddField(
            model_name='backtest',
            name='task_set_version',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='backtests', to='selection.tasksetversion'),
        ),
        migrations.RunSQL(GUARD, reverse_sql=PREVIOUS),
    ]
