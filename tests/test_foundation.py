"""The foundation's promises: schema rules, append-only history, the landing page."""

from __future__ import annotations

import dataclasses
import io

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.urls import reverse

from selection.engine.types import Unit

FORBIDDEN = ("importance", "priority", "weight", "salience", "score")


def test_no_memory_unit_field_stores_an_importance():
    unit_model = apps.get_model("selection", "MemoryUnit")
    model_fields = {f.name.lower() for f in unit_model._meta.get_fields()}
    engine_fields = {f.name.lower() for f in dataclasses.fields(Unit)}
    for name in model_fields | engine_fields:
        assert not any(word in name for word in FORBIDDEN), f"a unit stores {name!r}"


@pytest.mark.django_db
def test_every_model_change_has_its_migration():
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db
def test_pgvector_extension_is_installed():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        (version,) = cursor.fetchone()
    assert tuple(int(p) for p in version.split(".")[:2]) >= (0, 5)


@pytest.mark.parametrize(
    "table, statement",
    [
        ("authority_frameversion", "UPDATE authority_frameversion SET snapshot = '{}'::jsonb"),
        ("authority_frameversion", "DELETE FROM authority_frameversion"),
        ("authority_promotion", "UPDATE authority_promotion SET sequence = sequence + 10"),
    ],
)
def test_history_tables_refuse_raw_sql_rewrites(make_project, table, statement):
    make_project("alpha")
    with pytest.raises(IntegrityError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        assert cursor.fetchone()[0] == 1


def test_landing_page_requires_login(client, db):
    response = client.get(reverse("home"))
    assert response.status_code == 302
    assert reverse("login") in response["Location"]


def test_landing_page_lists_projects_with_frame_version_and_unit_counts(
    client, django_user_model, make_project, django_assert_max_num_queries
):
    from selection.models import MemoryUnit

    alpha = make_project("alpha", corpus="lab")
    make_project("beta", corpus="lab")
    for i in range(3):
        MemoryUnit.objects.create(
            corpus=alpha.corpus,
            project=alpha,
            uid=f"u{i}",
            evidence_class="rule",
            text="x" * 8,
            tokens=2,
        )
    user = django_user_model.objects.create_user("reader", password="pw-123456")
    from authority.models import RoleGrant
    from selection.models import Project

    for project in Project.objects.all():  # the page lists only projects the user holds a role in
        RoleGrant.objects.create(user=user, project=project, role="auditor")
    client.force_login(user)
    # the inbox of an auditor: its project table plus the recent activity, in a fixed number
    with django_assert_max_num_queries(8):
        response = client.get(reverse("home"))
    html = response.content.decode()
    assert response.status_code == 200
    rows = {row.split("<code>")[1].split("</code>")[0]: row for row in html.split("<tr>")[2:]}
    assert set(rows) == {"alpha", "beta"}
    assert "v1" in rows["alpha"] and '<td class="num">3</td>' in rows["alpha"]
    assert '<td class="num">0</td>' in rows["beta"]
