"""A database migrated by the previous release upgrades: data kept, tables renamed, triggers firing,
and a schema equal to a fresh migrate's."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

DUMP = Path(__file__).parent / "migrations_data" / "previous_main.sql.gz"

# the previous release's table -> today's (the authority app's tables take its name)
RENAMED = {
    "governance_frameversion": "authority_frameversion",
    "governance_promotion": "authority_promotion",
    "governance_rolegrant": "authority_rolegrant",
    "governance_auditentry": "authority_auditentry",
}

# tables the dump holds rows in: a proposal and its backtest, replays, reviews, traces, tombstones
FILLED = (
    "selection_corpus", "selection_project", "selection_memoryunit", "selection_task",
    "selection_ledgerentry", "selection_trace", "selection_tracecandidate", "selection_tracetombstone",
    "selection_traceoutcome", "selection_tasksetversion", "selection_retentionpolicy",
    "selection_evaluation", "selection_evaluationrun", "selection_evaluation_task_set_versions",
    "selection_job", "selection_localunit", "authority_frameversion", "authority_promotion",
    "authority_rolegrant", "authority_auditentry", "governance_proposal", "governance_proposalclosure",
    "governance_apitoken", "governance_webhookendpoint", "governance_webhookdelivery",
    "backtest_backtest", "backtest_taskreplay", "backtest_backtestdecision", "backtest_approval",
    "backtest_ablationreplay", "backtest_shadowreplay", "backtest_reviewcomment",
    "backtest_framehealth",
)  # fmt: skip

# the catalog of the public schema: what a migration makes, in a form two databases compare by
CATALOG = {
    "tables": """
        SELECT c.relname, c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'S', 'p')""",
    "columns": """
        SELECT c.relname, string_agg(
            concat_ws(' ', a.attname, format_type(a.atttypid, a.atttypmod),
                      CASE WHEN a.attnotnull THEN 'not null' END, 'identity:' || NULLIF(a.attidentity::text, ''),
                      'default:' || pg_get_expr(d.adbin, d.adrelid)),
            ', ' ORDER BY a.attnum)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
        WHERE n.nspname = 'public' AND c.relkind = 'r' GROUP BY c.relname""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = 'public'::regnamespace AND conrelid <> 0""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'""",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger
        WHERE NOT tgisinternal""",
    "functions": """
        SELECT p.oid::regprocedure::text, md5(pg_get_functiondef(p.oid)) FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace AND NOT EXISTS (
            SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')""",
    "sequences": """
        SELECT sequencename, data_type::text, increment_by::text FROM pg_sequences
        WHERE schemaname = 'public'""",
    "extensions": "SELECT extname, extversion FROM pg_extension",
}


def _psql() -> str:
    """psql of the embedded server's own build, else the one on PATH."""
    try:
        from pgserver._commands import POSTGRES_BIN_PATH

        bundled = Path(POSTGRES_BIN_PATH) / "psql"
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which("psql")
    if found is None:
        pytest.skip("no psql to restore the dump with")
    return found


def _run_psql(settings: dict, database: str, *args: str, stdin: bytes | None = None) -> None:
    env = {
        **os.environ,
        "PGHOST": settings["HOST"] or "localhost",
        "PGPORT": str(settings["PORT"] or 5432),
        "PGUSER": settings["USER"],
        "PGPASSWORD": settings["PASSWORD"] or "",
        "PGDATABASE": database,
    }
    subprocess.run(
        [_psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", *args],
        input=stdin, env=env, check=True, capture_output=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def upgrade_databases(django_db_setup, django_db_blocker):
    """Two new databases beside the test database, as connection aliases: `upgraded` holds the
    previous release's dump, `fresh` is empty. Both are dropped afterwards."""
    base = connections["default"].settings_dict
    names = {alias: f"{base['NAME']}_{alias}" for alias in ("upgraded", "fresh")}
    with django_db_blocker.unblock():
        for alias, name in names.items():
            _run_psql(base, "postgres", "-c", f'DROP DATABASE IF EXISTS "{name}"')
            _run_psql(base, "postgres", "-c", f'CREATE DATABASE "{name}" TEMPLATE template0')
            connections.settings[alias] = {**base, "NAME": name, "TEST": {**base["TEST"], "NAME": name}}
        _run_psql(base, names["upgraded"], "-f", "-", stdin=gzip.decompress(DUMP.read_bytes()))
        try:
            yield names
        finally:
            for alias, name in names.items():
                if alias in connections:
                    connections[alias].close()
                    del connections[alias]
                del connections.settings[alias]
                _run_psql(base, "postgres", "-c", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _counts(alias: str) -> dict[str, int]:
    with connections[alias].cursor() as cursor:
        tables = connections[alias].introspection.table_names(cursor)
        counts = {}
        for table in tables:
            cursor.execute(f'SELECT count(*) FROM "{table}"')
            counts[table] = cursor.fetchone()[0]
    return counts


def _catalog(alias: str) -> dict[str, list[tuple]]:
    with connections[alias].cursor() as cursor:
        listing = {}
        for part, sql in CATALOG.items():
            cursor.execute(sql)
            listing[part] = sorted(cursor.fetchall())
    return listing


def _refused(alias: str, statement: str, match: str) -> None:
    with pytest.raises(IntegrityError, match=match):
        with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
            cursor.execute(statement)


def test_a_database_of_the_previous_release_upgrades(upgrade_databases):
    before = _counts("upgraded")
    previous_name = {new: old for old, new in RENAMED.items()}
    assert all(before[previous_name.get(t, t)] > 0 for t in FILLED)

    call_command("migrate", database="upgraded", interactive=False, verbosity=0)
    call_command("migrate", database="fresh", interactive=False, verbosity=0)

    # every baseline and what follows it is recorded, and nothing is left to apply
    for alias in ("upgraded", "fresh"):
        executor = MigrationExecutor(connections[alias])
        leaves = executor.loader.graph.leaf_nodes()
        assert executor.migration_plan(leaves) == []
        applied = MigrationRecorder(connections[alias]).applied_migrations()
        for app in ("selection", "authority", "governance", "backtest"):
            ours = {key for key in executor.loader.disk_migrations if key[0] == app}
            assert ours <= set(applied), f"{alias}: {sorted(ours - set(applied))} not recorded"

    # every row is still there, the authority tables under their new names
    after = _counts("upgraded")
    assert not set(RENAMED) & set(after)
    for table, rows in before.items():
        if table == "django_migrations":
            continue
        if table in ("auth_permission", "django_content_type"):  # post_migrate adds new models
            assert after[table] >= rows
            continue
        assert after[RENAMED.get(table, table)] == rows, table
    # every unit of the previous release became one 'created' change of its corpus's memory sequence
    assert after["selection_memorychange"] == after["selection_memoryunit"]
    for table in FILLED:
        assert after[table] > 0, f"{table} has no row to carry"

    # the guards still refuse, on the renamed tables as on the others
    _refused("upgraded", "UPDATE authority_frameversion SET snapshot = '{}'::jsonb", "append-only")
    _refused("upgraded", "DELETE FROM authority_promotion", "append-only")
    _refused("upgraded", "DELETE FROM authority_auditentry", "append-only")
    _refused("upgraded", "UPDATE governance_proposal SET title = 'changed'", "immutable")
    _refused("upgraded", "UPDATE backtest_backtest SET error = 'changed'", "immutable")
    _refused("upgraded", "UPDATE selection_trace SET query = 'changed'", "append-only")
    _refused("upgraded", "DELETE FROM selection_tracecandidate", "append-only")
    _refused("upgraded", "UPDATE backtest_taskreplay SET metrics = '{}'::jsonb", "append-only")

    # and the schema is the one a fresh migrate builds
    upgraded, fresh = _catalog("upgraded"), _catalog("fresh")
    for part in CATALOG:
        extra = sorted(set(upgraded[part]) - set(fresh[part]))
        missing = sorted(set(fresh[part]) - set(upgraded[part]))
        assert not extra and not missing, f"{part}: only upgraded {extra}; only fresh {missing}"
