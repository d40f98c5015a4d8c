"""Shared fixtures: real PostgreSQL (embedded by default), real users and projects."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

# the browser fixtures (browser, browser_login) for tests marked `browser`
pytest_plugins = ["tests.browser"]


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
