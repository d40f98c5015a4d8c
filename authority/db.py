"""Database-level guarantees shared by the apps' migrations."""

from django.db import migrations

_REFUSE = """RAISE EXCEPTION '% rows are append-only: % refused', TG_TABLE_NAME, TG_OP
                USING ERRCODE = 'integrity_constraint_violation';"""


def _refusing_function(function: str) -> str:
    """A trigger function that refuses every UPDATE and DELETE of its table."""
    return f"""
        CREATE OR REPLACE FUNCTION {function}() RETURNS trigger AS $$
        BEGIN
            {_REFUSE}
        END;
        $$ LANGUAGE plpgsql;
        """


def append_only(table: str) -> migrations.RunSQL:
    """A trigger that refuses UPDATE and DELETE on a table: history is never rewritten.

    TRUNCATE stays possible: it is an operator's act on a whole table (and how test runs reset).
    """
    function = f"{table}_append_only"
    return migrations.RunSQL(
        sql=_refusing_function(function)
        + f"""CREATE TRIGGER {table}_no_update BEFORE UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION {function}();
        """,
        reverse_sql=f"""
        DROP TRIGGER IF EXISTS {table}_no_update ON {table};
        DROP FUNCTION IF EXISTS {function}();
        """,
    )


# the session-local setting a tombstoning service turns on, for its own transaction only
TOMBSTONE_SETTING = "fg.tombstone"


def append_only_but_tombstones(
    table: str, *, tombstones: str, trace_column: str, immutable: tuple[str, ...], allow: str
) -> migrations.RunSQL:
    """Replace `table`'s append-only trigger with one that lets exactly the tombstoning changes through.

    A change passes only when (1) the transaction set `fg.tombstone` to 'on' (set_config(..., true):
    the tombstoning service does, and turns it off again before it returns), (2) the row's trace
    already has a row in `tombstones` saying what changed and the content digests around it, and
    (3) for an UPDATE, none of the `immutable` columns changes. `allow` is "UPDATE" or "DELETE".
    Every other change is refused, as append_only refuses it.
    """
    function = f"{table}_append_only"
    row = "OLD"
    same = " AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in immutable) or "TRUE"
    return migrations.RunSQL(
        sql=f"""
        CREATE OR REPLACE FUNCTION {function}() RETURNS trigger AS $$
        BEGIN
            IF TG_OP = '{allow}'
               AND current_setting('{TOMBSTONE_SETTING}', true) = 'on'
               AND EXISTS (SELECT 1 FROM {tombstones} t WHERE t.trace_id = {row}.{trace_column})
               AND (TG_OP = 'DELETE' OR ({same}))
            THEN
                IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
                RETURN NEW;
            END IF;
            {_REFUSE}
        END;
        $$ LANGUAGE plpgsql;
        """,
        reverse_sql=_refusing_function(function),
    )
