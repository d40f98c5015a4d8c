"""`make demo` as a real process: it serves without DEBUG, runs a worker and beat, and SIGTERM stops
all it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return str(pid)


def _get(url: str):
    try:
        return urllib.request.urlopen(url, timeout=5)
    except urllib.error.HTTPError as error:
        return error


def test_sigterm_stops_server_worker_beat_postgres_and_redis(tmp_path):
    # its own servers, under the checkout: as root, PostgreSQL runs as a user who cannot enter
    # pytest's private tmp_path
    state = REPO / ".state" / f"demo-test-{os.getpid()}"
    port = _free_port()
    env = {**os.environ, "FG_STATE_DIR": str(state), "FG_QUIET_EMBEDDED": "1"}
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    log = tmp_path / "demo.log"
    demo = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--addr", f"127.0.0.1:{port}"],
        cwd=REPO,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 240
        while True:
            assert demo.poll() is None, f"the demo exited before serving:\n{log.read_text()[-3000:]}"
            try:
                login = _get(f"http://127.0.0.1:{port}/login/")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                assert time.monotonic() < deadline, f"the demo did not serve within 240 s:\n{log.read_text()[-3000:]}"
                time.sleep(1)
        assert login.status == 200
        assert "Content-Security-Policy" in login.headers
        # DEBUG off: an unknown page is the site's own 404, not Django's list of URL patterns
        missing = _get(f"http://127.0.0.1:{port}/no-such-page/")
        body = missing.read().decode()
        assert missing.status == 404 and "URLconf" not in body and "Page not found" in body
        # static files come collected, hashed, compressed and cached for a year
        css = next(line for line in login.read().decode().splitlines() if "stylesheet" in line)
        href = css.split('href="')[1].split('"')[0]
        assert href.count(".") >= 2, f"{href} has no content hash"
        request = urllib.request.Request(f"http://127.0.0.1:{port}{href}", headers={"Accept-Encoding": "gzip"})
        static = urllib.request.urlopen(request, timeout=5)
        assert static.headers["Content-Encoding"] == "gzip"
        assert "immutable" in static.headers["Cache-Control"]

        children = _children(demo.pid)
        assert len(children) == 3, f"expected a server, a worker and beat, found {children}"
        assert any(" beat " in _cmdline(p) for p in children), [_cmdline(p) for p in children]
        redis_pid = int((state / "redis" / "redis.pid").read_text())
        postmaster_pid = int((state / "pgdata" / "postmaster.pid").read_text().split()[0])
        assert all(_alive(p) for p in (*children, redis_pid, postmaster_pid))

        demo.send_signal(signal.SIGTERM)
        demo.wait(timeout=90)
        deadline = time.monotonic() + 20
        while any(_alive(p) for p in (*children, redis_pid, postmaster_pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [p for p in (*children, redis_pid, postmaster_pid) if _alive(p)]
        assert not left, f"still running after SIGTERM: {[_cmdline(p) for p in left]}\n{log.read_text()[-3000:]}"
        assert not (state / "pgdata" / "postmaster.pid").exists()
    finally:
        if demo.poll() is None:
            demo.kill()
        # never leave servers behind, whatever failed above
        subprocess.run(
            [sys.executable, "-m", "config.embedded", "destroy"], cwd=REPO, env=env, capture_output=True
        )


pytestmark = pytest.mark.worker
