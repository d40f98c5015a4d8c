"""`select --format mc-json|mc-text` on an imported MemoryCustodian tree, on the real PostgreSQL:
the peer's envelope, its explain text, its exit codes, and its explicit inputs by short slug."""

from __future__ import annotations

import hashlib
import io
import json

from custodian_kit import AREA_BACKEND, BACKEND, tree
from django.core.management import call_command
from django.core.management.base import CommandError

PROFILES = "### Enabled profiles\n- `profiles/docs.md`\n  - activation: explicit-only\n"


def run(*args) -> tuple[int, str]:
    out = io.StringIO()
    status = 0
    try:
        call_command("select", "--project", "mc", "--query", "how are notes stored", *args, stdout=out)
    except CommandError as error:
        status = error.returncode
    return status, out.getvalue()


def imported(tmp_path):
    root = tree(
        tmp_path / "p",
        {"areas/backend.md": BACKEND, "profiles/docs.md": "# Docs\n\nPrefer short answers.\n"},
        optional=AREA_BACKEND + "\n" + PROFILES,
    )
    call_command(
        "import_memory", str(root), "--corpus", "mc", "--project", "mc", stdout=io.StringIO(), stderr=io.StringIO()
    )
    return root


def test_mc_json_envelope_for_a_path_routed_read(db, tmp_path):
    imported(tmp_path)
    status, out = run("--task", "implementation", "--path", "cli/a.py", "--format", "mc-json")
    doc = json.loads(out)
    assert status == 0
    assert doc["output_schema_version"] == 1 and doc["command"] == "read" and doc["status"] == "PASS"
    data = doc["data"]
    assert data["loaded_modules"] == ["brief.md", "decisions.md", "constraints.md", "do-not-use.md", "areas/backend.md"]
    rows = {m["module_id"]: m for m in data["module_dispositions"]}
    assert rows["areas/backend.md"]["reasons"] == ["MC-ROUTE-PATH"]
    assert rows["areas/backend.md"]["details"] == ["cli/a.py <- cli/**"]
    assert rows["profiles/docs.md"]["disposition"] == "skipped"
    assert data["loaded_entry_ids"] == [
        "MC-DEC-20260801-11111111",
        "MC-CON-20260801-11111111",
        "MC-DNU-20260801-11111111",
        "MC-AREA-20260801-11111111",
    ]
    rendered = data["rendered_context"]
    assert data["context_sha256"] == hashlib.sha256(rendered.encode("utf-8")).hexdigest()
    assert data["routing_policy"] == "bounded"


def test_mc_text_explicit_profile_by_slug_and_strict_exit_codes(db, tmp_path):
    imported(tmp_path)
    status, text = run(
        "--task", "implementation", "--profile", "docs", "--path", "cli/a.py", "--format", "mc-text", "--explain"
    )
    assert status == 0
    assert "- profiles/docs.md\n  Disposition: loaded\n  Reason: MC-ROUTE-EXPLICIT-PROFILE" in text
    assert "Matching input: profile:docs" in text
    status, text = run("--task", "implementation", "--strict-routing", "--format", "mc-text")
    assert status == 1 and "Context pack not approved for substantial work" in text
    status, text = run("--task", "development", "--format", "mc-text")
    assert status == 1 and "Routing completeness: AMBIGUOUS" in text
    status, _ = run("--task", "development", "--strict-routing", "--format", "mc-text")
    assert status == 2


def test_the_trace_page_shows_bounded_routing_and_bundle_in_agreement(db, tmp_path, client, django_user_model):
    from django.urls import reverse

    from authority.models import RoleGrant
    from selection.models import Project

    imported(tmp_path)
    status, out = run("--task", "implementation", "--path", "web/a.ts", "--json", "--query", "storage layer module")
    doc = json.loads(out)
    assert status == 0
    auditor = django_user_model.objects.create_user("auditor")
    RoleGrant.objects.create(user=auditor, project=Project.objects.get(slug="mc"), role="auditor")
    client.force_login(auditor)
    html = client.get(reverse("trace-detail", args=[doc["trace_id"]])).content.decode()
    assert 'id="routing-policy"><strong>bounded</strong>' in html
    assert "admitted by ranking" not in html
    skipped = {d["unit"] for d in doc["routing"]["dispositions"] if d["disposition"] != "loaded"}
    admitted = {uid for item in doc["bundle"]["items"] for uid in item["sources"]}
    assert "mc-area-20260801-11111111" in skipped and not skipped & admitted


def test_the_trace_page_labels_the_envelope_policy_and_what_ranking_let_in():
    from django.template.loader import render_to_string

    from selection.engine.routing.types import RoutingInputs, RoutingReport, UnitDisposition

    report = RoutingReport(
        inputs=RoutingInputs(task_category="implementation"),
        completeness="COMPLETE",
        work_type=None,
        dispositions=(UnitDisposition("a-web", "skipped", "SKIP_NO_PATH_MATCH"),),
        mode="envelope",
        ranked_in=("a-web",),
    )
    html = render_to_string("selection/trace_routing.html", {"routing": report})
    assert "<strong>envelope</strong>" in html and "ranked retrieval fills the rest" in html
    assert "admitted by ranking" in html


def test_cross_agent_read__through_select_with_the_project_root_prints_the_peer_bytes(db, tmp_path):
    from test_cross_agent_read import EXPECTED, FILES, OPTIONAL

    root = tree(tmp_path / "p", FILES, optional=OPTIONAL)
    call_command(
        "import_memory", str(root), "--corpus", "mc", "--project", "mc", stdout=io.StringIO(), stderr=io.StringIO()
    )
    args = ("--task", "implementation", "--path", "cli/store.py", "--explain", "--project-root", str(root))
    status, text = run(*args, "--format", "mc-text")
    assert status == 0 and text == EXPECTED
    status, out = run(*args, "--format", "mc-json")
    data = json.loads(out)["data"]
    assert data["context_sha256"] == hashlib.sha256(EXPECTED.encode("utf-8")).hexdigest()
    assert data["rendered_context"] == EXPECTED
