"""A proposal that widens its scope is scored for leakage against the baseline frame's scope."""

from __future__ import annotations

import pytest

from authority.services import role_grant
from backtest import services
from backtest.models import TaskReplay
from backtest.replay import services as replays
from governance.proposals.services import proposal_submit
from selection.models import MemoryUnit, Project

pytestmark = pytest.mark.django_db


def test_leakage_is_measured_against_the_baseline_scope(sift, sift_users, django_capture_on_commit_callbacks):
    lead = sift_users["lead"]
    for slug in ("quill", "patchwork"):
        role_grant(user=lead, project=Project.objects.get(slug=slug), role="auditor")
    with django_capture_on_commit_callbacks(execute=False):
        widening = proposal_submit(
            project=sift,
            author=lead,
            title="See everything",
            patch={"scope": ["sift", "quill", "patchwork"]},
        )
        backtest = services.backtest_enqueue(proposal=widening, requested_by=lead)
    project_of = dict(MemoryUnit.objects.filter(corpus=sift.corpus).values_list("uid", "project__slug"))
    leaked = 0
    for task_id in backtest.task_ids:
        replay = replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side="candidate")
        admitted = replay.trace.admitted
        outside = [u for u in admitted if project_of[u] != "sift"]
        leaked += len(outside)
        expected = len(outside) / len(admitted) if admitted else 0.0
        assert replay.metrics["leakage"] == pytest.approx(expected)
    # the widened frame admits other projects' units, and the yardstick sees them
    assert leaked > 0
    assert any(r.metrics["leakage"] > 0 for r in TaskReplay.objects.filter(backtest=backtest))
