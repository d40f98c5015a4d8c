"""Write admission as frame policy, candidates never selected until admitted, and idempotency keys."""

from __future__ import annotations

import pytest

from tests.selection.memory_writes.conftest import counts

NOTE = {
    "class": "design_note",
    "title": "Quokka reranker note",
    "text": "The quokka reranker reorders tail queries by click-free relevance; it is the design note on quokka.",
}


def _selected(user, query="quokka reranker tail queries"):
    from selection.serving.serve import select_for_user

    selection = select_for_user(user=user, project_slug="sift", query=query, budget_tokens=2000)
    return selection.result.bundle.unit_ids()


def test_the_memory_block_is_a_frame_field_checked_like_any_other():
    from selection.corpus.frames import check_frame, memory_admission
    from selection.corpus.places import Place, Report

    report = Report()
    check_frame({"memory": {"admission": "sometimes"}}, Place("frame"), report, project="p", declared={"p"})
    assert report.issues and "admission" in str(report.issues[0]) and "sometimes" in str(report.issues[0])
    assert memory_admission({}) == "direct"
    assert memory_admission({"memory": {"admission": "candidate"}}) == "candidate"


def test_a_proposal_changes_the_memory_block_like_any_frame_field(sift, people):
    from governance.proposals.errors import ProposalInvalid
    from governance.proposals.services import proposal_submit
    from rules.frame_patch import apply_patch

    frame, issues = apply_patch({"purpose": "x"}, {"memory": {"admission": "candidate"}})
    assert not issues and frame["memory"] == {"admission": "candidate"}
    proposal = proposal_submit(project=sift, author=people["lead"], title="agents' memory waits for review",
                               patch={"memory": {"admission": "candidate"}})  # fmt: skip
    assert proposal.frame_version.snapshot["memory"] == {"admission": "candidate"}
    with pytest.raises(ProposalInvalid, match="admission"):
        proposal_submit(project=sift, author=people["lead"], title="t", patch={"memory": {"admission": "often"}})


def test_under_candidate_an_agents_write_waits_and_is_selected_once_admitted(sift, people, agent, candidate_admission):
    from selection.memory.writes.admission import candidates_of, unit_admit
    from selection.memory.writes.services import unit_create
    from selection.models import MemoryChange

    write = unit_create(actor=agent, project=sift, fields=NOTE, via="mcp")
    assert write.document["status"] == "candidate"
    assert [u.uid for u in candidates_of(sift)] == [write.unit]
    assert write.unit not in _selected(people["lead"])
    admitted = unit_admit(actor=people["lead"], project=sift, uid=write.unit, reason="checked the note", via="page")
    assert admitted.document["status"] == "active"
    assert write.unit in _selected(people["lead"])
    kinds = list(MemoryChange.objects.filter(unit__uid=write.unit).order_by("sequence").values_list("kind", flat=True))
    assert kinds == ["created", "admitted"]


def test_a_lead_writes_direct_even_under_candidate(sift, people, candidate_admission):
    from selection.memory.writes.services import unit_create

    assert unit_create(actor=people["lead"], project=sift, fields=NOTE, via="page").document["status"] == "active"


def test_a_declined_candidate_is_never_selected_and_its_writer_may_not_decide(sift, people, agent, candidate_admission):
    from selection.memory.writes.admission import unit_decline
    from selection.memory.writes.services import unit_create
    from selection.memory.writes.validation import WriteConflict, WriteRefused

    write = unit_create(actor=agent, project=sift, fields=NOTE, via="mcp")
    with pytest.raises(WriteConflict, match="another lead or reviewer"):
        unit_decline(actor=people["reviewer"], project=sift, uid=write.unit, reason="no", via="page")
    with pytest.raises(WriteRefused, match="reason"):
        unit_decline(actor=people["lead"], project=sift, uid=write.unit, reason="  ", via="page")
    unit_decline(actor=people["lead"], project=sift, uid=write.unit, reason="duplicates a design note", via="page")
    assert write.unit not in _selected(people["lead"])
    with pytest.raises(WriteConflict, match="declined"):
        unit_decline(actor=people["lead"], project=sift, uid=write.unit, reason="again", via="page")


def test_a_candidate_shows_its_conflict_and_supersedes_only_once_admitted(sift, people, agent, candidate_admission):
    from selection.memory.writes.admission import unit_admit
    from selection.memory.writes.services import unit_create, unit_supersede
    from selection.models import MemoryUnit

    clash = unit_create(actor=agent, project=sift, fields={**NOTE, "subject": "ship-rule", "facet": "criterion"},
                        via="mcp")  # fmt: skip
    assert clash.document["status"] == "candidate" and clash.document["conflicts"] == ["sf-rule-beat-baseline"]
    successor = unit_supersede(actor=agent, project=sift, targets=["sf-rule-beat-baseline"], fields=NOTE, via="mcp")
    assert MemoryUnit.objects.get(uid="sf-rule-beat-baseline").valid_to is None
    unit_admit(actor=people["lead"], project=sift, uid=successor.unit, reason="the rule changed", via="page")
    old, new = MemoryUnit.objects.get(uid="sf-rule-beat-baseline"), MemoryUnit.objects.get(uid=successor.unit)
    assert old.valid_to == new.valid_from


def test_the_same_key_twice_writes_once_and_another_body_is_refused(sift, people):
    from selection.memory.writes.services import unit_create
    from selection.memory.writes.validation import WriteConflict
    from selection.models import MemoryUnit

    first = unit_create(actor=people["lead"], project=sift, fields=NOTE, via="api", idempotency_key="k-1")
    before = counts()
    again = unit_create(actor=people["lead"], project=sift, fields=NOTE, via="api", idempotency_key="k-1")
    assert again.replayed and again.document == first.document and counts() == before
    assert MemoryUnit.objects.filter(title=NOTE["title"]).count() == 1
    with pytest.raises(WriteConflict, match="another request"):
        unit_create(actor=people["lead"], project=sift, fields={**NOTE, "title": "other"}, via="api",
                    idempotency_key="k-1")  # fmt: skip
    assert counts() == before


def test_an_agent_may_not_change_active_units_under_candidate(sift, people, agent, candidate_admission):
    from selection.memory.writes.services import loop_close, unit_support
    from selection.memory.writes.validation import WriteConflict
    from selection.models import MemoryUnit

    loop = MemoryUnit.objects.filter(project=sift, open_loop_status="open").order_by("uid").first()
    before = counts()
    with pytest.raises(WriteConflict, match="candidates"):
        loop_close(actor=agent, project=sift, uid=loop.uid, via="mcp")
    with pytest.raises(WriteConflict, match="candidates"):
        unit_support(actor=agent, project=sift, target="sf-rule-segments", source=loop.uid, via="mcp")
    assert counts() == before
