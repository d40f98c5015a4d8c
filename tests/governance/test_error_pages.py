"""Errors people can act on: styled pages inside the navigation, the role a refusal needs, form
errors summarised at the top with links to their fields; every page under one CSP."""

from __future__ import annotations

import re

import pytest
from django.test import RequestFactory
from django.urls import reverse

from config.csp import CONTENT_SECURITY_POLICY
from config.errors import server_error

from .test_views import form_data

pytestmark = pytest.mark.django_db


def test_an_unknown_proposal_is_a_404_page_inside_the_navigation(client, users):
    client.force_login(users["lead"])
    response = client.get(reverse("proposal-detail", args=[999999]))
    html = response.content.decode()
    assert response.status_code == 404
    assert 'id="error-page"' in html and "Page not found" in html
    assert '<span class="who">lead</span>' in html  # the top bar with log-out is there
    assert "URLconf" not in html and "Traceback" not in html


def test_a_refused_action_names_the_role_it_needs(client, users):
    client.force_login(users["auditor"])
    response = client.post(reverse("proposal-create", args=["alpha"]), {"title": "x"})
    html = response.content.decode()
    assert response.status_code == 403
    assert "it needs the project lead role" in html
    assert '<span class="who">auditor</span>' in html


def test_a_server_error_renders_inside_the_navigation(users):
    request = RequestFactory().get("/")
    request.user = users["reviewer"]
    response = server_error(request)
    html = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in html and '<span class="who">reviewer</span>' in html


def test_form_errors_are_summarised_at_the_top_with_links_to_their_fields(client, users, project):
    client.force_login(users["lead"])
    response = client.post(reverse("proposal-create", args=["alpha"]), form_data(project, title="", class_pull="x"))
    html = response.content.decode()
    assert response.status_code == 400  # a refused proposal is the client's error
    summary = html[html.index('id="error-summary"') :]
    summary = summary[: summary.index("</section>")]
    assert 'href="#id_title"' in summary and 'href="#id_class_pull"' in summary
    assert html.index('id="error-summary"') < html.index('class="editor"')
    # the fields the links point at exist on the page
    assert 'id="id_title"' in html and 'id="id_class_pull"' in html


def test_every_page_carries_the_policy_and_no_inline_script(client, users, project):
    client.force_login(users["lead"])
    for url in (
        reverse("home"),
        reverse("project-detail", args=["alpha"]),
        reverse("proposal-create", args=["alpha"]),
        reverse("proposal-list", args=["alpha"]),
        reverse("audit-log"),
        reverse("trace-list"),
        reverse("login"),
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
        assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe-inline'" not in CONTENT_SECURITY_POLICY.split(
            "script-src"
        )[1].split(";")[0]
        for tag in re.findall(r"<script\b[^>]*>", response.content.decode()):
            assert "src=" in tag or 'type="application/json"' in tag, f"inline script on {url}: {tag}"
