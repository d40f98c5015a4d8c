"""The authority app's tables take its name (authority_*), and so do their sequences, constraints,
indexes, triggers and trigger functions. A trigger follows its table; the append-only functions
name no table in their bodies (they read TG_TABLE_NAME), so renaming them is enough. Foreign keys
to these tables, whose names end with the table they point at, take the names Django gives them."""

from django.db import migrations

TABLES = ("authority_frameversion", "authority_promotion", "authority_rolegrant", "authority_auditentry")


def _renamed(old: str, new: str) -> str:
    """SQL renaming every object of the (already renamed) tables whose name starts with `old`."""
    tables = ", ".join(f"'{t}'" for t in TABLES)
    return f"""
    DO $$
    DECLARE
        t text;
        r record;
    BEGIN
        FOREACH t IN ARRAY ARRAY[{tables}] LOOP
            FOR r IN SELECT s.relname FROM pg_class s JOIN pg_depend d ON d.objid = s.oid
                     WHERE s.relkind = 'S' AND d.refobjid = t::regclass AND starts_with(s.relname, '{old}') LOOP
                EXECUTE format('ALTER SEQUENCE %I RENAME TO %I', r.relname, '{new}' || substr(r.relname, {len(old) + 1}));
            END LOOP;
            -- a primary key's or unique constraint's index takes the constraint's new name with it
            FOR r IN SELECT conname FROM pg_constraint
                     WHERE conrelid = t::regclass AND starts_with(conname, '{old}') LOOP
                EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT %I TO %I', t, r.conname, '{new}' || substr(r.conname, {len(old) + 1}));
            END LOOP;
            FOR r IN SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                     WHERE x.indrelid = t::regclass AND starts_with(i.relname, '{old}') LOOP
                EXECUTE format('ALTER INDEX %I RENAME TO %I', r.relname, '{new}' || substr(r.relname, {len(old) + 1}));
            END LOOP;
            FOR r IN SELECT tgname, tgfoid::regprocedure AS function, p.proname FROM pg_trigger
                     JOIN pg_proc p ON p.oid = tgfoid
                     WHERE tgrelid = t::regclass AND NOT tgisinternal AND starts_with(tgname, '{old}') LOOP
                EXECUTE format('ALTER TRIGGER %I ON %I RENAME TO %I', r.tgname, t, '{new}' || substr(r.tgname, {len(old) + 1}));
                IF starts_with(r.proname, '{old}') THEN
                    EXECUTE format('ALTER FUNCTION %s RENAME TO %I', r.function, '{new}' || substr(r.proname, {len(old) + 1}));
                END IF;
            END LOOP;
        END LOOP;
    END $$;
    """


def _foreign_keys_named(prefix: str):
    """RunPython code giving every foreign key to the tables the name Django gives one to `prefix`*."""

    def rename(apps, schema_editor):
        quote = schema_editor.quote_name
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                """
                SELECT c.conrelid::regclass::text, c.conname, a.attname, c.confrelid::regclass::text, f.attname
                FROM pg_constraint c
                JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                JOIN pg_attribute f ON f.attrelid = c.confrelid AND f.attnum = c.confkey[1]
                WHERE c.contype = 'f' AND c.confrelid = ANY(%s::regclass[])
                """,
                [list(TABLES)],
            )
            keys = cursor.fetchall()
        for table, name, column, to_table, to_column in keys:
            named = lambda t: prefix + t.removeprefix("authority_") if t in TABLES else t  # noqa: E731
            wanted = schema_editor._create_index_name(
                named(table), [column], suffix=f"_fk_{named(to_table)}_{to_column}"
            )
            if wanted != name:
                schema_editor.execute(f"ALTER TABLE {quote(table)} RENAME CONSTRAINT {quote(name)} TO {quote(wanted)}")

    return rename


class Migration(migrations.Migration):

    dependencies = [
        ("authority", "0001_frame_versions_promotions_roles_audit"),
    ]

    operations = [
        migrations.AlterModelTable(name="auditentry", table=None),
        migrations.AlterModelTable(name="frameversion", table=None),
        migrations.AlterModelTable(name="promotion", table=None),
        migrations.AlterModelTable(name="rolegrant", table=None),
        migrations.RunSQL(_renamed("governance_", "authority_"), reverse_sql=_renamed("authority_", "governance_")),
        migrations.RunPython(
            _foreign_keys_named("authority_"), _foreign_keys_named("governance_")
        ),
    ]
