"""Memory write fixtures: context-lab imported for real, sift's people, agent tokens, a writer."""

from __future__ import annotations

import pytest

from tests.api.conftest import api, people, token_for  # noqa: F401 - fixtures shared with the API tests
from tests.backtest.conftest import context_lab, sift, sift_users  # noqa: F401


@pytest.fixture
def agent_token(people, token_for):  # noqa: F811
    """An agent token of sift, issued by sift's reviewer."""
    return token_for(people["reviewer"], "sift", "agent")


@pytest.fixture
def agent(agent_token):
    """The user an agent token's request carries (its owner, with the token's scope)."""
    from governance.tokens import services as tokens

    return tokens.token_user(agent_token)


@pytest.fixture
def candidate_admission(sift):  # noqa: F811
    """sift's frame with `memory: {admission: candidate}`, promoted as its next version."""
    from authority.selectors import current_frame_version
    from authority.services import frame_version_create, promotion_create

    current = current_frame_version(project=sift)
    snapshot = {**current.snapshot, "memory": {"admission": "candidate"}}
    version = frame_version_create(project=sift, snapshot=snapshot, origin="proposal", parent=current)
    promotion_create(project=sift, frame_version=version)
    return version


def counts() -> dict[str, int]:
    """Rows a write may add: units, links, memory changes, audit rows, idempotency keys."""
    from authority.models import AuditEntry
    from selection.models import MemoryChange, MemoryUnit, MemoryWriteKey, UnitLink

    return {
        "units": MemoryUnit.objects.count(),
        "links": UnitLink.objects.count(),
        "changes": MemoryChange.objects.count(),
        "audit": AuditEntry.objects.count(),
        "keys": MemoryWriteKey.objects.count(),
    }
