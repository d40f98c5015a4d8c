"""API fixtures: the context-lab corpus imported for real, users of sift and quill, their tokens."""

from __future__ import annotations

import pytest

from tests.backtest.conftest import (  # noqa: F401 - fixtures shared with the backtest tests
    celery_worker_process,
    context_lab,
    sift,
    sift_users,
)

API = "/api/v1"


@pytest.fixture
def people(sift_users, django_user_model):  # noqa: F811
    """sift's lead, reviewer, auditor and outsider; `both` leads sift and quill; `root`, a superuser."""
    from authority.models import RoleGrant
    from selection.models import Project

    quill = Project.objects.get(slug="quill")
    both = django_user_model.objects.create_user("both", password="pw-both")
    for project in (quill, Project.objects.get(slug="sift")):
        RoleGrant.objects.create(user=both, project=project, role="lead")
    root = django_user_model.objects.create_superuser("root", password="pw-root")
    return {**sift_users, "both": both, "root": root}


@pytest.fixture
def token_for():
    """A live token's secret for `user`: `role` in the project with slug `project`, or read only."""
    from governance.tokens import services as tokens
    from selection.models import Project

    def make(user, project: str | None = None, role: str | None = None, days: int = 30) -> str:
        scoped = Project.objects.get(slug=project) if project else None
        return tokens.token_create(user=user, name="test", project=scoped, role=role, days=days).secret

    return make


class ApiClient:
    """Calls the API through Django's test client with a bearer token (or none)."""

    def __init__(self, client, token: str | None):
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def get(self, path: str, **params):
        return self.client.get(API + path, params, headers=self.headers)

    def post(self, path: str, body=None):
        return self.client.post(
            API + path, body if body is not None else {}, content_type="application/json", headers=self.headers
        )


@pytest.fixture
def api(client):
    def make(token: str | None = None) -> ApiClient:
        return ApiClient(client, token)

    return make


def assert_problem(response, status: int) -> dict:
    """The response is RFC 9457 problem details with this status; returns the document."""
    assert response.status_code == status, response.content[:2000]
    assert response["Content-Type"].startswith("application/problem+json")
    doc = response.json()
    assert {"type", "title", "status", "detail"} <= set(doc)
    assert doc["status"] == status
    return doc
