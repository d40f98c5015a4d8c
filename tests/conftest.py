"""Shared fixtures: real PostgreSQL (embedded by default), real users and projects."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

# Frame health readings set off by imports, labelled tasks and promotions (backtest.health) are off
# in the suite, here and in the session's worker (it inherits the environment): they would put
# replays on the worker that no test waits for. The health tests turn them on where they test them.
os.environ.setdefault("FG_HEALTH_ON_CHANGE", "0")


@pytest.fixture(autouse=True)
def _health_on_change_off(request):
    """The same for this process, whose settings were read before this file (not under -p no:django)."""
    if not request.config.pluginmanager.hasplugin("django"):
        yield
        return
    from django.conf import settings

    was = settings.FG_HEALTH_ON_CHANGE
    settings.FG_HEALTH_ON_CHANGE = False
    yield
    settings.FG_HEALTH_ON_CHANGE = was


# the browser fixtures (browser, browser_login) for tests marked `browser`; what parallel runs need
pytest_plugins = ["tests.browser", "tests.parallel"]

# Django's default hasher takes a quarter of a second a password on a small machine, and the suite
# creates and signs in hundreds of users; what a password proves does not depend on the hasher.
FAST_HASHER = "django.contrib.auth.hashers.MD5PasswordHasher"


def pytest_configure(config):
    if not config.pluginmanager.hasplugin("django"):
        return
    from django.conf import settings

    if not settings.configured:
        return
    from django.contrib.auth import hashers

    settings.PASSWORD_HASHERS = [FAST_HASHER]
    hashers.get_hashers.cache_clear()
    hashers.get_hashers_by_algorithm.cache_clear()


@pytest.hookimpl(trylast=True)  # after pytest's own session teardown has dropped the test database
def pytest_sessionfinish(session, exitstatus):
    """Stop the embedded PostgreSQL and redis if this test run started them (settings did, on
    load); servers that were already running, a demo's or another run's, are left alone. In a
    parallel run the controller started them and stops them, after its workers have finished."""
    if hasattr(session.config, "workerinput"):
        return
    from config import embedded

    if "redis" in embedded.started_here:
        embedded.stop_redis()
    if "postgres" in embedded.started_here:
        from django.db import connections

        connections.close_all()
        embedded.stop_postgres()


@pytest.fixture
def loopback_webhooks(settings):
    """Webhooks may reach the tests' local receivers (tests.receiver, plain http on 127.0.0.1),
    as a development set-up allows them to; the session's worker gets the same settings."""
    settings.FG_WEBHOOK_ALLOW_HTTP = True
    settings.FG_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]


@pytest.fixture
def make_project(db):
    """A corpus + project with a promoted frame version 1, built through the models."""
    from authority.models import FrameVersion, Promotion
    from selection.models import Corpus, Project

    def make(slug: str = "alpha", corpus: str | None = None, frame: dict | None = None):
        corpus_row, _ = Corpus.objects.get_or_create(
            name=corpus or f"{slug}-corpus",
            defaults={"standpoint": datetime(2026, 9, 20, tzinfo=UTC)},
        )
        project = Project.objects.create(corpus=corpus_row, slug=slug, name=slug.title())
        version = FrameVersion.objects.create(
            project=project,
            number=1,
            snapshot=frame or {"purpose": "test", "scope": [slug], "work_types": {}},
            author_label="import",
            origin="import",
        )
        Promotion.objects.create(project=project, frame_version=version, sequence=1)
        return project

    return make
