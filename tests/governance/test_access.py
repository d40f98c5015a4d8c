"""access.py: one user, different roles in different projects; superusers read but do not write."""

from __future__ import annotations

import pytest

from authority import access


def test_roles_are_per_project(project, users, grant):
    from selection.models import Project

    beta = Project.objects.get(slug="beta")
    grant(users["auditor"], beta, "lead")
    access.access_propose(users["auditor"], beta)
    with pytest.raises(access.AccessDenied, match="needs the project lead role"):
        access.access_propose(users["auditor"], project)
    assert access.access_read(users["auditor"], project).can_propose is False


def test_auditor_reads_and_nothing_else(project, users):
    caps = access.access_read(users["auditor"], project)
    assert (caps.can_read, caps.can_propose, caps.can_review, caps.can_promote) == (
        True,
        False,
        False,
        False,
    )
    for check in (access.access_propose, access.access_review, access.access_promote):
        with pytest.raises(access.AccessDenied):
            check(users["auditor"], project)


def test_superuser_reads_everything_but_writes_only_with_a_grant(project, users, grant):
    access.access_read(users["root"], project)
    with pytest.raises(access.AccessDenied):
        access.access_propose(users["root"], project)
    grant(users["root"], project, "lead")
    access.access_propose(users["root"], project)


def test_inactive_and_anonymous_users_are_refused(project, users):
    from django.contrib.auth.models import AnonymousUser

    users["lead"].is_active = False
    for user in (users["lead"], AnonymousUser(), None):
        with pytest.raises(access.AccessDenied):
            access.access_read(user, project)
        with pytest.raises(access.AccessDenied):
            access.access_propose(user, project)


def test_access_denied_is_a_permission_denied():
    from django.core.exceptions import PermissionDenied

    assert issubclass(access.AccessDenied, PermissionDenied)
