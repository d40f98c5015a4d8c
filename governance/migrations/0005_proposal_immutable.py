"""A submitted proposal's patch, base and versions never change; only its state read-model moves."""

from django.db import migrations

GUARD = """
CREATE OR REPLACE FUNCTION governance_proposal_guard() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'proposals are kept: DELETE of proposal % refused', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.patch IS DISTINCT FROM OLD.patch
        OR NEW.base_version_id IS DISTINCT FROM OLD.base_version_id
        OR NEW.frame_version_id IS DISTINCT FROM OLD.frame_version_id
        OR NEW.project_id IS DISTINCT FROM OLD.project_id
        OR NEW.author_id IS DISTINCT FROM OLD.author_id
        OR NEW.title IS DISTINCT FROM OLD.title
        OR NEW.rationale IS DISTINCT FROM OLD.rationale
        OR NEW.uid IS DISTINCT FROM OLD.uid
        OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'proposal %: a submitted proposal is immutable (only its state moves)', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER governance_proposal_guard BEFORE UPDATE OR DELETE ON governance_proposal
    FOR EACH ROW EXECUTE FUNCTION governance_proposal_guard();
"""


class Migration(migrations.Migration):
    dependencies = [("governance", "0004_frames_in_authority")]

    operations = [
        migrations.RunSQL(
            GUARD,
            reverse_sql="""
            DROP TRIGGER IF EXISTS governance_proposal_guard ON governance_proposal;
            DROP FUNCTION IF EXISTS governance_proposal_guard();
            """,
        )
    ]
