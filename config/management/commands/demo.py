"""`make demo`: migrate, load fixtures, create demo accounts, then run a worker, beat and the server.

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

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from authority.models import Role
from authority.services import role_grant
from config import embedded
from selection.models import Project

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


class Command(BaseCommand):
    help = "Set up and serve the dashboard with the fixture corpora, demo accounts, a worker and beat."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true")

    def handle(self, *args, addr, no_worker, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("import_fixtures", stdout=self.stdout)
        passwords = create_demo_accounts()
        self.stdout.write(self.style.SUCCESS("Demo accounts (roles on every project):"))
        for username, role in DEMO_ACCOUNTS:
            self.stdout.write(f"  {username:9} {role.label:13} password: {passwords[username]}")

        # the children run without DEBUG; this process's own settings are already loaded
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "FG_DEBUG": "0"}
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--no-input", "--verbosity=0"], env=env, check=True
        )
        children: list[subprocess.Popen] = []
        stopping = []

        def stop(signum, frame):
            stopping.append(signum)
            raise KeyboardInterrupt

        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)
        try:
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
                            sys.executable,
                            "-m",
                            "celery",
                            "-A",
                            "config",
                            "beat",
                            "--loglevel=WARNING",
                            f"--schedule={schedule}",
                        ],  # fmt: skip
                        env=env,
                    )
                )
            children.append(
                subprocess.Popen([sys.executable, "manage.py", "runserver", addr, "--noreload", "--nostatic"], env=env)
            )
            self.stdout.write(self.style.SUCCESS(f"Serving http://{addr}/ — Ctrl-C stops everything."))
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
