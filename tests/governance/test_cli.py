"""manage.py propose / promote: the same services and access checks as the pages."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from backtest.review import services as review_services
from governance.models import Proposal


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def patch_file(tmp_path):
    def write(patch):
        path = tmp_path / "patch.json"
        path.write_text(json.dumps(patch))
        return str(path)

    return write


def test_propose_stores_a_proposal_and_prints_warnings(project, users, patch_file):
    out, err = run(
        "propose",
        "alpha",
        "--title",
        "Contract first",
        "--rationale",
        "E2 under review",
        "--patch",
        patch_file({"work_types": {"implementation-review": ["measurement-contract", "decision"]}}),
        "--user",
        "lead",
    )
    proposal = Proposal.objects.get()
    assert f"proposal {proposal.pk}: alpha v1 -> v2" in out
    assert 'carries the class "measurement-contract"' in err
    assert proposal.rationale == "E2 under review" and proposal.author == users["lead"]


@pytest.mark.parametrize(
    "patch, user, message",
    [
        ({"class_pull": 4}, "auditor", "access denied"),
        (
            {"work_types": {"implementation-review": ["Decision"]}},
            "lead",
            "work_types.implementation-review[0]",
        ),
        ({"class_pull": 4}, "nobody", 'no active user "nobody"'),
    ],
)
def test_propose_refusals_are_command_errors(
    project, users, patch_file, counts, patch, user, message
):
    before = counts()
    with pytest.raises(CommandError, match=message.replace("[", r"\[").replace("]", r"\]")):
        run("propose", "alpha", "--title", "t", "--patch", patch_file(patch), "--user", user)
    assert counts() == before


def test_promote_goes_through_the_same_checks(project, users, submit, make_backtest, counts):
    proposal = submit()
    backtest = make_backtest(proposal)
    with pytest.raises(CommandError, match="has not been reviewed"):
        run("promote", str(proposal.pk), "--user", "lead")
    review_services.backtest_review(
        backtest=backtest, reviewer=users["reviewer"], verdict="approve", comment=""
    )
    before = counts()
    with pytest.raises(CommandError, match="access denied"):
        run("promote", str(proposal.pk), "--user", "reviewer")
    assert counts() == before
    out, _ = run("promote", str(proposal.pk), "--user", "lead")
    assert "alpha: v2 is current (promotion 2)" in out
