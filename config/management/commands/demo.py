"""`make demo`: migrate, load fixtures, create demo accounts, then run the server, a worker and beat.

Time to the first page on a small machine: static files are collected while the fixtures import;
the import's model saves the query encoder's graph, so the server's warm-up does not load the
full loader again; the server starts before the worker and beat, which would take the cores its
start needs; the command says when the first page answers.

Beat sends the daily jobs (retention, frame health: settings.CELERY_BEAT_SCHEDULE) to the worker.

The server runs as production does: DEBUG off, static files collected with hashed names and
served compressed by WhiteNoise. Ctrl-C, SIGTERM or SIGHUP stops every process this command
started, and the embedded servers if it started them.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from authority.models import Role
from authority.services import role_grant
from config import embedded
from selection.memory import embeddings, query_encoder
from selection.models import Project

FIRST_PAGE_WAIT_S = 300

DEMO_ACCOUNTS = (("lead", Role.LEAD), ("reviewer", Role.REVIEWER), ("auditor", Role.AUDITOR))


def create_demo_accounts() -> dict[str, str]:
    """(Re)create the three demo accounts with fresh passwords and roles on every project."""
    users = get_user_model()
    passwords = {}
    with transaction.atomic():
        for username, role in DEMO_ACCOUNTS:
            user, _ = users.objects.get_or_create(username=username)
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            user.save()
            for project in Project.objects.all():
                role_grant(user=user, project=project, role=role)
            passwords[username] = password
    return passwords


def process_age() -> float:
    """Seconds since this process started (its Django set-up counts toward the first page)."""
    with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
        ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        return float(uptime.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")


def first_page(url: str, server: subprocess.Popen) -> float | None:
    """When the server first answered `url` (perf_counter), or None if it did not within
    FIRST_PAGE_WAIT_S (or exited)."""
    deadline = time.perf_counter() + FIRST_PAGE_WAIT_S
    while time.perf_counter() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=10):
                return time.perf_counter()
        except urllib.error.HTTPError:
            return time.perf_counter()  # a page (the sign-in redirect's target, say) answered
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    return None


class Command(BaseCommand):
    help = "Set up and serve the dashboard with the fixture corpora, demo accounts, a worker and beat."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true")

    def handle(self, *args, addr, no_worker, **options):
        started = time.perf_counter() - process_age()
        # the children run without DEBUG; this process's own settings are already loaded
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "FG_DEBUG": "0"}
        collect = subprocess.Popen(
            [sys.executable, "manage.py", "collectstatic", "--no-input", "--verbosity=0"], env=env
        )
        phases = {"set-up": time.perf_counter() - started}
        mark = time.perf_counter()

        def phase(name: str) -> None:
            nonlocal mark
            phases[name], mark = time.perf_counter() - mark, time.perf_counter()

        call_command("migrate", interactive=False, verbosity=0)
        phase("migrate")
        call_command("import_fixtures", stdout=self.stdout)
        phase("fixtures")
        if embeddings.get_embedder.cache_info().currsize:
            query_encoder.get_query_encoder()  # the import's model saves the query graph: seconds
            phase("query graph")
        passwords = create_demo_accounts()
        phase("accounts")
        self.stdout.write(self.style.SUCCESS("Demo accounts (roles on every project):"))
        for username, role in DEMO_ACCOUNTS:
            self.stdout.write(f"  {username:9} {role.label:13} password: {passwords[username]}")
        if collect.wait() != 0:
            raise subprocess.CalledProcessError(collect.returncode, collect.args)
        phase("static files")
        children: list[subprocess.Popen] = []
        stopping = []

        def stop(signum, frame):
            stopping.append(signum)
            raise KeyboardInterrupt

        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)
        try:
            children.append(
                subprocess.Popen(
                    [sys.executable, "manage.py", "runserver", addr, "--noreload", "--nostatic", "--skip-checks"],
                    env=env,
                )
            )
            answered = first_page(f"http://{addr}/", children[0])
            phase("server")
            self.stdout.write(
                self.style.SUCCESS(f"Serving http://{addr}/ — Ctrl-C stops everything.")
                + (f" First page {answered - started:.1f} s after the command started" if answered else "")
                + f" ({', '.join(f'{name} {seconds:.1f} s' for name, seconds in phases.items())})."
            )
            if not no_worker:
                children.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "celery",
                            "-A",
                            "config",
                            "worker",
                            "--loglevel=WARNING",
                            "--concurrency=1",
                            "--hostname=demo@%h",
                        ],
                        env=env,
                    )
                )
                # the daily schedule (retention, frame health); its state file under .state/
                schedule = embedded.STATE_DIR / "celerybeat-schedule"
                children.append(
                    subprocess.Popen(
                        [
                            sys.executable, "-m", "celery", "-A", "config", "beat",
                            "--loglevel=WARNING", f"--schedule={schedule}",
                        ],  # fmt: skip
                        env=env,
                    )
                )
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            # a second signal while stopping must not cut the clean-up short
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_IGN)
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for child in children:
                try:
                    child.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            if "redis" in embedded.started_here:
                embedded.stop_redis()
            if "postgres" in embedded.started_here:
                embedded.stop_postgres()
            self.stdout.write("Stopped.")
