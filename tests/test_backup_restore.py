"""Backup and restore, with real processes: `manage.py backup` taken while selections go on, restored
by `manage.py restore` into a fresh empty database; there `verify_traces` passes (every trace's
digest recomputed, every chain link), the rows and index fingerprints match the manifest taken in
the dump's own snapshot, and a selection gives the digest it gave before. A database that already
holds tables is refused, naming why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections

from tests.selection.test_traces import (
    Lab,
    embedding_cache,  # noqa: F401 - module-wide vectors
)

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db(transaction=True)


def _manage(database: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "FG_DATABASE_NAME": database, "FG_QUIET_EMBEDDED": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def _digest(database: str, lab: Lab) -> str:
    done = _manage(database, "select", "--project", "tlab", "--query", lab.task.query, "--budget", "130", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)["bundle"]["digest"]


@pytest.fixture
def empty_database():
    name = f"fg_restore_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    yield name
    connections.close_all()
    with connection.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_backup_taken_under_load_restores_with_its_chains_and_digests(tmp_path, empty_database):
    from selection.models import Trace

    lab = Lab(tmp_path)
    for budget in (130, 200, 400):
        lab.select(budget=budget)
    source = connection.settings_dict["NAME"]
    before = _digest(source, lab)

    # selections go on while the backup runs: its manifest and dump share one snapshot
    stop, selected = threading.Event(), []

    def load():
        try:
            while not stop.is_set():
                selected.append(lab.select(budget=150).trace.pk)
        finally:
            connection.close()

    worker = threading.Thread(target=load)
    worker.start()
    try:
        while len(selected) < 2:
            stop.wait(0.1)
        call_command("backup", str(tmp_path / "backup"))
    finally:
        stop.set()
        worker.join(60)
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert manifest["counts"]["selection_trace"] >= 6 and manifest["index_fingerprints"].keys() == {"tlab"}
    assert Trace.objects.count() > 0

    # a database that holds tables is refused, and nothing changes there
    traces = Trace.objects.count()
    with pytest.raises(CommandError, match=r'database "\w+" is not empty: it holds \d+ tables'):
        call_command("restore", str(tmp_path / "backup"))
    assert Trace.objects.count() == traces
    # a backup is written into a new directory only
    with pytest.raises(CommandError, match="is not empty"):
        call_command("backup", str(tmp_path / "backup"))

    restored = _manage(empty_database, "restore", str(tmp_path / "backup"))
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert "every chain intact" in restored.stdout and "match the backup's manifest" in restored.stdout
    verified = _manage(empty_database, "verify_traces")
    assert verified.returncode == 0 and "chain intact" in verified.stdout, verified.stdout + verified.stderr
    heads = manifest["chain_heads"]["tlab"]
    assert heads and f"tlab: {heads[0][0]} traces, chain intact" in verified.stdout
    assert _digest(empty_database, lab) == before
