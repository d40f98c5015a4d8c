"""Database-level guarantees shared by the apps' migrations."""

from django.db import migrations


def append_only(table: str) -> migrations.RunSQL:
    """A trigger that refuses UPDATE and DELETE on a table: history is never rewritten.

    TRUNCATE stays possible: it is an operator's act on a whole table (and how test runs reset).
    """
    function = f"{table}_append_only"
    return migrations.RunSQL(
        sql=f"""
        CREATE OR REPLACE FUNCTION {function}() RETURNS trigger AS $$
        BEGIN
            RAISE EXCEPTION '% rows are append-only: % refused', TG_TABLE_NAME, TG_OP
                USING ERRCODE = 'integrity_constraint_violation';
        END;
        $$ LANGUAGE plpgsql;
        CREATE TRIGGER {table}_no_update BEFORE UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION {function}();
        """,
        reverse_sql=f"""
        DROP TRIGGER IF EXISTS {table}_no_update ON {table};
        DROP FUNCTION IF EXISTS {function}();
        """,
    )
