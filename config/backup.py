"""Backup and restore: one consistent pg_dump of the database with a manifest taken in its snapshot.

`backup_write(directory)` opens a REPEATABLE READ transaction, exports its snapshot, records in the
manifest what that snapshot holds (row counts, each project's trace chain head, each corpus's
index fingerprint: selection/memory/index_cache.py) and has pg_dump read the same snapshot
(`--snapshot`), so the dump and its manifest agree even while selections and writes go on.
`backup_restore(directory)` refuses a database that already holds tables, runs pg_restore in one
transaction, then checks the restored rows against the manifest and every trace chain
(verify_chains): a restore either matches its backup or says where it does not. A fingerprint
names row versions on one server, so a restored corpus has a new one: its cached index is
dropped and built again from the restored rows, which give the same bundles and digests.

pg_dump and pg_restore are the embedded server's own (the pgserver package ships them), or those
FG_PG_BIN names (a directory) for an external PostgreSQL: a client as new as the server.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pgserver
from django.db import connection, transaction
from django.utils import timezone

from selection.memory import index_cache
from selection.models import Corpus, Project, Trace
from selection.traces.chain import verify_chains

DUMP = "database.dump"
MANIFEST = "manifest.json"
COUNTED = ("selection_memoryunit", "selection_trace", "selection_tracecandidate", "authority_auditentry")


class BackupError(Exception):
    """A backup or restore refused or failed; the message says why and what to do."""


@dataclass(frozen=True)
class Restored:
    tables: int
    counts: dict[str, int]
    fingerprints: tuple[dict[str, str], dict[str, str]]  # the backup's, the restored database's
    traces: int
    chains_intact: bool


def pg_binary(name: str) -> str:
    directory = os.environ.get("FG_PG_BIN") or str(Path(pgserver.__file__).parent / "pginstall" / "bin")
    path = Path(directory) / name
    if not path.exists():
        raise BackupError(f"no {name} in {directory} (set FG_PG_BIN to the directory of PostgreSQL's client programs)")
    return str(path)


def _connection_args() -> tuple[list[str], dict[str, str]]:
    db = connection.settings_dict
    args = ["--dbname", db["NAME"], "--username", db["USER"] or "postgres"]
    if db.get("HOST"):
        args += ["--host", db["HOST"]]
    if db.get("PORT"):
        args += ["--port", str(db["PORT"])]
    env = {**os.environ}
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]
    for key, value in (db.get("OPTIONS") or {}).items():
        if key == "sslmode":
            env["PGSSLMODE"] = str(value)
    return args, env


def _snapshot_facts() -> dict:
    """What the current transaction's snapshot holds, as the manifest records it."""
    with connection.cursor() as cursor:
        counts = {}
        for table in COUNTED:
            cursor.execute(f'SELECT count(*) FROM "{table}"')  # noqa: S608 - table names are ours
            counts[table] = cursor.fetchone()[0]
    traces = Trace.objects.order_by("-chain_position").values_list("chain_position", "digest")
    heads = {project.slug: list(traces.filter(project=project)[:1]) for project in Project.objects.order_by("slug")}
    fingerprints = {
        corpus.name: index_cache.corpus_fingerprint(corpus.pk) for corpus in Corpus.objects.order_by("name")
    }
    return {"counts": counts, "chain_heads": heads, "index_fingerprints": fingerprints}


def backup_write(directory: Path) -> dict:
    """Dump the database and its manifest into `directory` (new or empty); the manifest."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise BackupError(f"{directory} is not empty: back up into a new directory")
    directory.mkdir(parents=True, exist_ok=True)
    args, env = _connection_args()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cursor.execute("SELECT pg_export_snapshot(), current_setting('server_version')")
            snapshot, server_version = cursor.fetchone()
        facts = _snapshot_facts()
        dumped = subprocess.run(
            [pg_binary("pg_dump"), *args, "--format=custom", "--no-owner", "--no-privileges",
             f"--snapshot={snapshot}", "--file", str(directory / DUMP)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
    if dumped.returncode != 0:
        raise BackupError(f"pg_dump failed: {dumped.stderr.strip()[-2000:]}")
    manifest = {
        "format": 1,
        "taken_at": timezone.now().isoformat(),
        "database": connection.settings_dict["NAME"],
        "server_version": server_version,
        "dump": DUMP,
        "dump_bytes": (directory / DUMP).stat().st_size,
        **facts,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


def database_tables() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
        return [row[0] for row in cursor.fetchall()]


def backup_restore(directory: Path) -> Restored:
    """Restore the backup in `directory` into this (empty) database and check it against its manifest."""
    directory = Path(directory)
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError as missing:
        raise BackupError(f"{directory} holds no {MANIFEST}: not a backup") from missing
    if not (directory / manifest.get("dump", DUMP)).exists():
        raise BackupError(f"{directory} lacks its dump {manifest.get('dump', DUMP)}")
    name = connection.settings_dict["NAME"]
    tables = database_tables()
    if tables:
        raise BackupError(
            f'database "{name}" is not empty: it holds {len(tables)} tables ({", ".join(tables[:3])}, ...). '
            "Restore into an empty database (a fresh FG_STATE_DIR, or createdb for an external PostgreSQL)"
        )
    args, env = _connection_args()
    connection.close()  # pg_restore's transaction is the only one on the database
    restored = subprocess.run(
        [pg_binary("pg_restore"), *args, "--no-owner", "--no-privileges", "--exit-on-error",
         "--single-transaction", str(directory / manifest.get("dump", DUMP))],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if restored.returncode != 0:
        raise BackupError(f"pg_restore failed (nothing restored): {restored.stderr.strip()[-2000:]}")
    facts = _snapshot_facts()
    for key in ("counts", "chain_heads"):
        if json.loads(json.dumps(facts[key])) != manifest[key]:
            raise BackupError(f"the restored {key.replace('_', ' ')} differ from the backup's: {facts[key]}")
    # restored rows are new row versions on another server: their fingerprints are new, and an index
    # cached under a corpus id before is dropped, to be built again from the rows
    for corpus in Corpus.objects.all():
        index_cache.discard(corpus.pk)
    reports = verify_chains(Project.objects.order_by("slug"))
    return Restored(
        tables=len(database_tables()),
        counts=facts["counts"],
        fingerprints=(manifest["index_fingerprints"], facts["index_fingerprints"]),
        traces=sum(r.traces for r in reports),
        chains_intact=all(r.intact for r in reports),
    )
