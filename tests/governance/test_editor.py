"""The structured editor: classes no unit carries are refused unless confirmed, and the merge
patch is previewed live from the form as it stands."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from governance.models import Proposal

from .test_views import form_data

pytestmark = pytest.mark.django_db


def test_a_misspelt_class_is_refused_on_its_field(client, project, users):
    client.force_login(users["lead"])
    data = form_data(project, **{"wt__implementation-review": "rule\nrunbok\ndecision"})
    response = client.post(reverse("proposal-create", args=["alpha"]), data)
    html = response.content.decode()
    assert response.status_code == 400 and not Proposal.objects.exists()  # refused: the client's error
    assert "no unit in scope carries &#x27;runbok&#x27;" in html
    summary = html[html.index('id="error-summary"') :]
    assert 'href="#id_wt__implementation-review"' in summary[: summary.index("</section>")]


def test_a_new_class_is_kept_when_the_author_confirms_it(client, project, users):
    client.force_login(users["lead"])
    data = form_data(
        project, **{"wt__implementation-review": "rule\nrunbook\ndecision"}, confirm_unknown_classes="on"
    )
    response = client.post(reverse("proposal-create", args=["alpha"]), data)
    assert response.status_code == 302
    assert Proposal.objects.get().patch["work_types"]["implementation-review"] == ["rule", "runbook", "decision"]


def test_the_editor_offers_the_corpus_classes_and_previews_the_patch(client, project, users):
    client.force_login(users["lead"])
    html = client.get(reverse("proposal-create", args=["alpha"])).content.decode()
    script = re.search(r'<script id="corpus-classes" type="application/json">(.*?)</script>', html)
    offered = json.loads(script.group(1))
    assert offered == sorted(["decision", "rule", "result", "chapter-prose", "convention"])
    assert 'data-chips="implementation-review"' in html and "js/editor.js" in html

    preview = reverse("proposal-preview", args=["alpha"])
    data = form_data(project, **{"wt__implementation-review": "rule\ndecision\nresult"}, title="")
    html = client.post(preview, data).content.decode()
    shown = re.search(r'id="patch-preview-json">(.*?)</pre>', html, re.S).group(1).replace("&quot;", '"')
    assert json.loads(shown) == {"work_types": {"implementation-review": ["rule", "decision", "result"]}}
    html = client.post(preview, form_data(project, **{"wt__implementation-review": "runbok"})).content.decode()
    assert "runbok" in html and "patch appears once they are fixed" in html
    assert not Proposal.objects.exists()  # a preview stores nothing
