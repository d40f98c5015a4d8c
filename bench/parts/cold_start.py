"""Cold start: what a fresh process pays before it answers, the figures an agent's hook and an
orchestrator see.

  select_in_process   `manage.py select` as a fresh process with no server (FG_SERVER_URL empty):
                      wall seconds and the child's own peak RSS (/usr/bin/time -f %M)
  server_ready_s      a fresh `manage.py runserver` (DEBUG off) until /api/v1/health/ready answers 200
  first_select_ms     the first selection that server answers once ready (the local command channel,
                      signed as `select` signs it), and the second
  select_over_server  `manage.py select` as a fresh process served by that server

The corpus is the bench's stored one (its first project, its first task's query). `make demo`'s
time to its first page is not measured here: it needs an empty state directory (a PostgreSQL of its
own); docs/performance.md gives the figure and the command.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from django.db import connection

from bench.stats import check, unmeasured
from selection.serving import server_client

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 600
COLD_SELECT_MAX_S = 2.0  # `manage.py select` as a fresh process, wall
COLD_SELECT_RSS_MAX_MB = 300.0  # ... and its peak RSS
FIRST_SELECT_MAX_MS = 1000.0  # the first selection a fresh server answers once ready
DEMO_FIRST_PAGE_MAX_S = 15.0  # `make demo` to its first page, venv present, empty state
COMMAND_TIMEOUT_S = 600


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _timed_process(argv: list[str], env: dict) -> dict:
    """A fresh process run to its end: wall seconds, its own peak RSS and its exit status."""
    begun = time.perf_counter()
    child = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = child.communicate(timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        raise
    wall = time.perf_counter() - begun
    return {"wall_s": round(wall, 3), "status": child.returncode, "stdout": out.decode(), "stderr": err.decode()}


def _select(project: str, query: str, env: dict) -> dict:
    """`manage.py select` under /usr/bin/time, which reports the child's own peak RSS."""
    argv = ["/usr/bin/time", "-f", "fg-peak-rss-kb %M", sys.executable, "manage.py", "select",
            "--project", project, "--query", query, "--explain"]  # fmt: skip
    run = _timed_process(argv, env)
    peak = [ln for ln in run["stderr"].splitlines() if ln.startswith("fg-peak-rss-kb ")]
    served = [ln for ln in run["stdout"].splitlines() if ln.startswith("Served: ")]
    if run["status"] != 0 or not peak:
        raise RuntimeError(f"select exited {run['status']}: {run['stderr'][-800:]}")
    return {
        "wall_s": run["wall_s"],
        "peak_rss_mb": round(int(peak[-1].split()[1]) / 1024, 1),
        "served": served[-1].removeprefix("Served: ") if served else "",
    }


def _wait_ready(base: str, server: subprocess.Popen) -> float:
    begun = time.perf_counter()
    while time.perf_counter() - begun < READY_TIMEOUT_S:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode} before it was ready")
        try:
            with urllib.request.urlopen(base + "/api/v1/health/ready", timeout=5) as answer:
                if answer.status == 200:
                    return time.perf_counter() - begun
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server was not ready within {READY_TIMEOUT_S} s")


def _served_select_ms(base: str, project: str, query: str) -> float:
    options = {"project": project, "query": query, "json": True, "verbosity": 1}
    begun = time.perf_counter()
    answer = server_client.command_over_server("select", options, url=base)
    elapsed = (time.perf_counter() - begun) * 1e3
    if not isinstance(answer, server_client.Answer) or answer.returncode != 0:
        raise RuntimeError(f"the server did not serve the selection: {answer}")
    return round(elapsed, 1)


def time_cold_start(project: str, query: str) -> dict:
    # the children work on this process's database (a test run's, say: FG_DATABASE_NAME names it)
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "FG_SERVER_URL": "",
        "FG_DATABASE_NAME": connection.settings_dict["NAME"],
    }
    out: dict = {"project": project}
    _select(project, query, env)  # the page cache warm, the query graph saved: a machine in use
    out["select_in_process"] = _select(project, query, env)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server_env = {**env, "FG_DEBUG": "0"}
    argv = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--nostatic"]
    server = subprocess.Popen(argv, cwd=ROOT, env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        out["server_ready_s"] = round(_wait_ready(base, server), 2)
        out["first_select_ms"] = _served_select_ms(base, project, query)
        out["second_select_ms"] = _served_select_ms(base, project, query + " again")
        out["select_over_server"] = _select(project, query, {**env, "FG_SERVER_URL": base})
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return out


def describe(result: dict) -> str:
    here, there = result["select_in_process"], result.get("select_over_server") or {}
    return (
        f"cold start: `select` as a fresh process {here['wall_s']} s, peak RSS {here['peak_rss_mb']} MB "
        f"in process; a fresh server ready in {result.get('server_ready_s')} s, its first selection "
        f"{result.get('first_select_ms')} ms (second {result.get('second_select_ms')} ms); `select` "
        f"served by it {there.get('wall_s')} s, peak RSS {there.get('peak_rss_mb')} MB"
    )


def targets(sizes: dict) -> list[dict]:
    """The cold-start rows (the first size with a database ran the part), and the demo's, which
    the bench cannot run: it needs an empty state directory."""
    cold = next((entry["cold_start"] for entry in sizes.values() if entry.get("cold_start")), None)
    rows = []
    if cold is None:
        why = "the cold-start part did not run (--no-cold-start, --no-db or no size with a database)"
        for name in ("`select` as a fresh process, wall", "first selection of a fresh server once ready"):
            rows.append(unmeasured(name, "<=", COLD_SELECT_MAX_S, "s", why))
    else:
        for key, how in (("select_in_process", "no server"), ("select_over_server", "served by the running server")):
            run = cold[key]
            name = f"`select` as a fresh process ({how})"
            rows.append(check(f"{name}, wall", run["wall_s"], "<=", COLD_SELECT_MAX_S, "s"))
            rows.append(check(f"{name}, peak RSS", run["peak_rss_mb"], "<=", COLD_SELECT_RSS_MAX_MB, "MB"))
        rows.append(
            check(
                "first selection of a fresh server once ready", cold["first_select_ms"], "<=", FIRST_SELECT_MAX_MS, "ms"
            )
        )
    rows.append(
        unmeasured(
            "`make demo` to its first page (venv present, empty state)",
            "<=",
            DEMO_FIRST_PAGE_MAX_S,
            "s",
            "needs an empty state directory and its own PostgreSQL; measured by hand (docs/performance.md, Start-up)",
        )
    )
    return rows
