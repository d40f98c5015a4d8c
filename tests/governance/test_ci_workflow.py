"""The CI workflow of docs/ci.md, run as written against a real worker: from a patch file applied to
the exported frame in a branch, through the proposal and its backtest, to the posted markdown
comment and the failing exit of a failed gate. `gh` (GitHub's command line) is the one stand-in:
a script that records what it was asked to post."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.db import connection

from backtest.models import Backtest
from governance.models import Proposal
from selection.corpus.frames import merge_patch
from tests.backtest.conftest import CONTEXT_LAB, wait_finished

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
GH = """#!/bin/sh
printf '%s\\n' "$*" >> "$GH_LOG/calls"
case "$*" in *--edit-last*) exit 1 ;; esac  # no earlier comment on this pull request
while [ $# -gt 0 ]; do [ "$1" = --body-file ] && cp "$2" "$GH_LOG/posted.md"; shift; done
"""


def ci_script() -> str:
    """The script block of docs/ci.md that follows its ci-script marker."""
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    after = text[text.index("<!-- ci-script") :]
    return re.search(r"```sh\n(.*?)```", after, re.S).group(1)


def _manage(*args, env) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_ci_workflow_posts_the_comment_and_fails_the_job_on_a_failed_gate(
    celery_worker_process, sift_users, tmp_path
):
    env = {
        **os.environ,
        "FG_DATABASE_NAME": connection.settings_dict["NAME"],
        "FG_CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "FG_QUIET_EMBEDDED": "1",
        "PYTHONPATH": str(ROOT),
    }
    # the branch: the exported frame, with a patch file applied (the change under review fails its gates)
    branch = tmp_path / "repo"
    (branch / "frames").mkdir(parents=True)
    frame_file = branch / "frames" / "sift.yaml"
    _manage("export_frame", "sift", str(frame_file), env=env)
    spec = next(p for p in yaml.safe_load((CONTEXT_LAB / "proposals.yaml").read_text())["proposals"]
                if p["id"] == "report-prose-in-design-review")  # fmt: skip
    patch_file = tmp_path / "change.json"
    patch_file.write_text(json.dumps(spec["patch"]))
    edited = merge_patch(yaml.safe_load(frame_file.read_text()), json.loads(patch_file.read_text()))
    frame_file.write_text(yaml.safe_dump(edited, sort_keys=False))
    (branch / "manage.py").symlink_to(ROOT / "manage.py")
    bin_dir, log = tmp_path / "bin", tmp_path / "gh"
    bin_dir.mkdir()
    log.mkdir()
    (bin_dir / "gh").write_text(GH)
    (bin_dir / "gh").chmod(0o755)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # the venv's python
    (bin_dir / "python").chmod(0o755)
    script = branch / "frame-review.sh"
    script.write_text(ci_script())
    try:
        done = subprocess.run(
            ["bash", str(script)],
            cwd=branch,
            capture_output=True,
            text=True,
            timeout=600,
            env={
                **env,
                "PATH": f"{bin_dir}:{env['PATH']}",
                "PROJECT": "sift",
                "CORPUS": "context-lab",
                "FRAME_FILE": "frames/sift.yaml",
                "FG_CI_USER": "lead",
                "FG_SITE": "https://fg.example.org",
                "TITLE": "Raise report prose in design review (pull request 7)",
                "PR": "7",
                "GH_LOG": str(log),
            },
        )
        # the job fails: a gate failed
        assert done.returncode == 1, done.stdout + done.stderr
        assert "failed its gates" in done.stderr
        proposal = Proposal.objects.get(title="Raise report prose in design review (pull request 7)")
        assert proposal.patch == spec["patch"] and proposal.author == sift_users["lead"]
        # the comment was posted (no earlier one to edit), whole
        calls = (log / "calls").read_text().splitlines()
        assert calls == ["pr comment 7 --edit-last --body-file comment.md", "pr comment 7 --body-file comment.md"]
        posted = (log / "posted.md").read_text()
        assert posted.splitlines()[0] == f"<!-- frame-governance:backtest project=sift proposal={proposal.pk} -->"
        backtest = Backtest.objects.get(proposal=proposal)
        assert f"❌ failed: backtest #{backtest.pk}" in posted and "**regress**" in posted
        assert f"https://fg.example.org/backtests/{backtest.pk}/" in posted
    finally:
        for backtest in Backtest.objects.all():
            wait_finished(backtest.pk, timeout=420)
