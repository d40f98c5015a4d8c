"""The seed's four proposals, replayed end to end through the engine on the book corpus.

Each proposal of ../shared/benchmarks/book-ch10/proposals.yaml is backtested as a lead would
(backtest_enqueue, every replay through replay_one, backtest_finish) and its decision, primary
delta and failing gates are pinned. The book promoted v2-contract-in-implementation and
v2-wider-class-pull and rejected the other two; we differ on v2-wider-class-pull (precision
falls past its gate here: docs/results.md says why). A change to the engine that moves any of
these must say so by changing this table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backtest import judging, services
from backtest.replay import dispatch
from backtest.replay import services as replays
from governance.models import Proposal

BOOK = Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "book-ch10"

pytestmark = pytest.mark.skipif(not (BOOK / "proposals.yaml").exists(), reason="book-ch10 corpus not present")

# proposal -> (passed, primary delta rounded to 3 places, metrics whose gate failed)
# The class pull fills a class by relevance and C5 pulls support/refute neighbours and open loops,
# so widening the pull costs recall (-0.046; the relevant units of each class are already pulled
# at 3, the next two are filler that outranks required evidence), and the combination lands on
# the book's own -0.046.
PINNED = {
    "v2-prose-earlier": (False, -0.046, {"must_include_recall"}),
    "v2-contract-in-implementation": (True, 0.037, set()),
    "v2-wider-class-pull": (False, -0.046, {"must_include_recall", "precision"}),
    "v3-combined": (False, -0.046, {"must_include_recall", "precision"}),
}


# the one proposal of several parts, taken apart: part -> flagged (costs more than it gives).
# The combined proposal fails on precision although no part alone breaks the 0.02 it may lose;
# chapter prose in architecture review adds no recall inside the whole and costs precision
# (−0.017), as v2-prose-earlier alone fails: the one part the book's review also rejected.
# Widening the class pull costs recall on its own
# (v2-wider-class-pull: -0.046, pinned above), so the combined proposal's class_pull part is
# flagged too: two of its three parts cost more than they give.
ABLATED = {
    "v3-combined": {
        "class_pull": True,
        "work_types.architecture_review": True,
        "work_types.implementation_review": False,
    }
}


@pytest.fixture
def book(db):
    from selection.memory.importing import corpus_import

    return corpus_import(BOOK)


def test_the_books_four_proposals_decide_as_pinned(book):
    found, ablated = {}, {}
    for uid in PINNED:
        proposal = Proposal.objects.select_related("project", "frame_version").get(uid=uid)
        backtest = services.backtest_enqueue(proposal=proposal, requested_by=None)
        for task_id in backtest.task_ids:
            for side in dispatch.replay_sides(backtest):
                replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side=side)
        decision = judging.backtest_finish(backtest_id=backtest.pk)
        primary = decision.gate_results[0]
        failed = {g["metric"] for g in decision.gate_results if not g["passed"]}
        found[uid] = (decision.passed, round(primary["delta"], 3), failed)
        if decision.ablation:
            print(f"\n{uid} taken apart (alone / within the whole):")
            for row in decision.ablation:
                cells = ", ".join(
                    f"{m} {row['alone'][m]:+.3f} / {row['marginal'][m]:+.3f}"
                    for m in ("must_include_recall", "precision", "tokens")
                )
                print(f"  {row['part']}: {cells}; flagged={row['flagged']} hurts={row['hurt_tasks']} {row['why']}")
            ablated[uid] = {row["part"]: row["flagged"] for row in decision.ablation}
    assert found == PINNED
    assert ablated == ABLATED
