"""A trace page shows another project's units by id, project and class only, to a reader who holds
no role in that project."""

from __future__ import annotations

import pytest
from django.urls import reverse

from authority.models import FrameVersion, Promotion, RoleGrant
from selection.models import Project
from tests.selection.test_traces import embedding_cache  # noqa: F401 - module-wide vectors

OTHER_TEXT = "Other project ranking budget rule"


@pytest.fixture
def lab(db, tmp_path):
    from tests.selection.test_traces import Lab

    return Lab(tmp_path)


def test_the_bundle_redacts_units_of_projects_the_reader_cannot_read(lab, client, django_user_model):
    current = FrameVersion.objects.filter(project=lab.project).order_by("-number").first()
    wide = FrameVersion.objects.create(
        project=lab.project,
        number=current.number + 1,
        snapshot={**current.snapshot, "scope": ["tlab", "tother"]},
        parent=current,
        author_label="test",
    )
    Promotion.objects.create(
        project=lab.project, frame_version=wide, sequence=Promotion.objects.filter(project=lab.project).count() + 1
    )
    trace = lab.select(budget=400).trace
    assert "o1" in trace.admitted, trace.admitted

    insider = django_user_model.objects.create_user("insider")
    outsider = django_user_model.objects.create_user("tlab-only")
    for user in (insider, outsider):
        RoleGrant.objects.create(user=user, project=lab.project, role="auditor")
    RoleGrant.objects.create(user=insider, project=Project.objects.get(slug="tother"), role="auditor")

    client.force_login(outsider)
    page = client.get(reverse("trace-detail", args=[trace.pk])).content.decode()
    assert OTHER_TEXT not in page
    assert "[redacted: you hold no role in project tother]" in page
    assert "<code>o1</code>" in page and "tother" in page  # id, project and class stay
    assert "1 item of projects you hold no role in is shown by id, project and class only" in page

    client.force_login(insider)
    page = client.get(reverse("trace-detail", args=[trace.pk])).content.decode()
    assert OTHER_TEXT in page and "redacted" not in page
