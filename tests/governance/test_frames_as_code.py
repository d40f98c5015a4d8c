"""Frames as code: export_frame writes the promoted frame as YAML and propose --from-file reads it
back, the patch being the difference; the markdown comment of a finished backtest, from the
command and the API."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command
from django.urls import reverse

from authority.selectors import current_frame_version
from governance.models import Proposal
from tests.backtest.test_review_card import _finished


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_a_frame_round_trips_through_a_yaml_file(project, users, tmp_path, django_capture_on_commit_callbacks):
    path = tmp_path / "alpha.yaml"
    run("export_frame", "alpha", str(path))
    current = current_frame_version(project=project)
    text = path.read_text()
    assert text.startswith("# The frame of alpha, v1") and yaml.safe_load(text) == current.snapshot
    with pytest.raises(CommandError, match="changes nothing"):
        run("propose", "alpha", "--from-file", str(path), "--user", "lead")
    frame = yaml.safe_load(text)
    frame["class_pull"] = 2
    frame["purpose"] = "Sharper test frame"
    path.write_text(yaml.safe_dump(frame, sort_keys=False))
    with django_capture_on_commit_callbacks(execute=False):
        out, _ = run("propose", "alpha", "--from-file", str(path), "--user", "lead")
    number = int(out.split(":")[0].removeprefix("proposal "))
    proposal = Proposal.objects.get(pk=number)
    assert proposal.patch == {"class_pull": 2, "purpose": "Sharper test frame"}
    assert proposal.frame_version.snapshot == frame and proposal.title == "alpha frame from alpha.yaml"
    path.write_text(yaml.safe_dump({**frame, "class_pull": [1, 2]}))
    with pytest.raises(CommandError, match="class_pull"):
        run("propose", "alpha", "--from-file", str(path), "--user", "lead")
    path.write_text("- a list\n")
    with pytest.raises(CommandError, match="must hold a frame"):
        run("propose", "alpha", "--from-file", str(path), "--user", "lead")


@pytest.mark.django_db
def test_the_markdown_comment_names_each_gate_the_tasks_the_codes_and_the_links(client, sift, sift_users):
    backtest, decision = _finished("report-prose-in-design-review")  # it fails its gates
    client.force_login(sift_users["auditor"])
    response = client.get(f"/api/v1/backtests/{backtest.pk}?format=markdown")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/markdown")
    text = response.content.decode()
    if os.environ.get("FG_SCREENS"):  # for a person to read, beside the screenshots
        Path(os.environ["FG_SCREENS"], "backtest-comment.md").write_text(text, encoding="utf-8")
    first = text.splitlines()[0]
    assert first == f"<!-- frame-governance:backtest project=sift proposal={backtest.proposal_id} -->"
    assert f"❌ failed: backtest #{backtest.pk}" in text
    assert "| primary | `must_include_recall` | **fail** |" in text  # it held where it had to rise
    assert "| max_drop | `precision` | **regress** |" in text and "95 % interval" in text
    assert "Held to superiority as a change" in text
    assert "Reason codes" in text and "**Tokens:**" in text
    moved = "`t3-next-quarter`: `precision` 0.462 → 0.333 (regressed) — [trace diff](http://testserver/traces/diff/?a="
    assert moved in text
    assert f"http://testserver{reverse('backtest-detail', args=[backtest.pk])}" in text
    out, _ = run("backtest", "context-lab", "--proposal", str(backtest.proposal_id), "--latest", "--format", "markdown")
    assert out.splitlines()[0] == first and "| max_drop | `precision` | **regress** |" in out
