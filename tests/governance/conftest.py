"""Governance fixtures: a project with a promoted frame and units, users holding each role."""

from __future__ import annotations

import pytest

# the context-lab corpus, its users and a real worker, for the rollback and revert tests
from tests.backtest.conftest import celery_worker_process, context_lab, sift, sift_users  # noqa: F401
from tests.backtest.test_standards import promoted_v2  # noqa: F401

FRAME = {
    "purpose": "Test frame",
    "scope": ["alpha"],
    "default_classes": ["rule"],
    "class_pull": 3,
    "work_types": {
        "implementation-review": ["decision", "rule", "result"],
        "publication-review": ["chapter-prose"],
    },
    "open_loop_work_types": ["release-readiness"],
    "gates": {
        "primary": "must_include_recall",
        "min_improvement": 0.0,
        "limits": [{"metric": "precision", "max_drop": 0.02}],
    },
    "x-note": "kept through every patch",
}
CARRIED = ("decision", "rule", "result", "chapter-prose", "convention")


@pytest.fixture
def project(make_project):
    from selection.models import MemoryUnit, Project

    alpha = make_project("alpha", corpus="lab", frame=FRAME)
    make_project("beta", corpus="lab")
    for i, cls in enumerate(CARRIED):
        MemoryUnit.objects.create(
            corpus=alpha.corpus,
            project=alpha,
            uid=f"u{i}",
            evidence_class=cls,
            text="x" * 8,
            tokens=2,
        )
    return Project.objects.get(pk=alpha.pk)


@pytest.fixture
def grant(db):
    from authority.models import RoleGrant

    def give(user, project, role):
        RoleGrant.objects.create(user=user, project=project, role=role)
        return user

    return give


@pytest.fixture
def users(project, django_user_model, grant):
    """lead, reviewer, auditor of alpha; outsider with no role; root, a superuser with no grant."""
    make = django_user_model.objects.create_user
    return {
        "lead": grant(make("lead"), project, "lead"),
        "reviewer": grant(make("reviewer"), project, "reviewer"),
        "auditor": grant(make("auditor"), project, "auditor"),
        "outsider": make("outsider"),
        "root": django_user_model.objects.create_superuser("root", password=None),
    }


@pytest.fixture
def submit(project, users):
    from governance.proposals.services import proposal_submit

    def run(patch=None, **kwargs):
        kwargs.setdefault("author", users["lead"])
        kwargs.setdefault("title", "Prefer rules in implementation review")
        return proposal_submit(
            project=kwargs.pop("project", project),
            rationale=kwargs.pop("rationale", "why not"),
            patch=patch
            if patch is not None
            else {"work_types": {"implementation-review": ["rule", "decision"]}},
            **kwargs,
        )

    return run


@pytest.fixture
def make_backtest():
    """A backtest row as the backtest app would leave it, written straight through the models."""
    from backtest.models import Backtest, BacktestDecision
    from backtest.review.selectors import current_engine_version, current_task_set_digest

    def make(
        proposal,
        *,
        passed=True,
        status="finished",
        digest=None,
        engine=None,
        decided=True,
        baseline=None,
    ):
        backtest = Backtest.objects.create(
            proposal=proposal,
            baseline_version=baseline or proposal.base_version,
            candidate_version=proposal.frame_version,
            task_ids=[],
            # by default the project's task set as it is now, as the backtest app computes it
            task_set_digest=digest or current_task_set_digest(project=proposal.project) or "digest-1",
            engine_version=engine or current_engine_version() or "test-engine",
            gates={},
            status=status,
        )
        if decided:
            BacktestDecision.objects.create(
                backtest=backtest,
                passed=passed,
                primary_metric="must_include_recall",
                baseline_means={},
                candidate_means={},
                gate_results=[],
                per_task_deltas=[],
            )
        return backtest

    return make


@pytest.fixture
def counts():
    """Row counts of every table a governance write touches."""
    from authority.models import AuditEntry, FrameVersion, Promotion
    from backtest.models import Approval
    from governance.models import Proposal

    def snapshot():
        return {
            m.__name__: m.objects.count()
            for m in (FrameVersion, Proposal, Promotion, AuditEntry, Approval)
        }

    return snapshot
