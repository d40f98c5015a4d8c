"""The write services against the real database: each write, its rows, its change and its audit row."""

from __future__ import annotations

import pytest

from authority.access import AccessDenied
from tests.selection.memory_writes.conftest import counts

NEW = {
    "class": "design_note",
    "title": "Tail queries need their own judged set",
    "text": "The tail segment of the judged set holds too few queries to show a one point nDCG change; "
    "extend it with 200 tail queries before the next ranking review.",
}


def _audit(action):
    from authority.models import AuditEntry

    return list(AuditEntry.objects.filter(action=action).order_by("id"))


def test_a_lead_creates_a_unit_with_its_change_vector_and_audit_row(sift, people):
    from selection.memory.writes.services import unit_create
    from selection.models import Corpus, MemoryChange, MemoryUnit

    before = Corpus.objects.get(pk=sift.corpus_id)
    write = unit_create(actor=people["lead"], project=sift, fields=NEW, via="api")
    unit = MemoryUnit.objects.get(uid=write.unit)
    assert unit.status == "active" and unit.project == sift and unit.embedding is not None
    assert unit.uid.startswith("sift-") and unit.created_at is not None
    change = MemoryChange.objects.get(unit=unit)
    assert change.kind == "created" and change.via == "api" and change.actor == people["lead"]
    assert change.sequence == before.sequence + 1 == write.document["sequence"] == unit.created_sequence
    assert change.state["text"] == NEW["text"] and change.state["status"] == "active"
    after = Corpus.objects.get(pk=sift.corpus_id)
    # a write moves the sequence every process tails, not the revision (which forces a rebuild)
    assert after.sequence == before.sequence + 1 and after.revision == before.revision
    (entry,) = _audit("unit.created")
    assert entry.actor == people["lead"] and entry.object_id == str(unit.pk)


def test_supersede_closes_the_old_units_validity_at_the_new_ones_start(sift, people):
    from selection.memory.writes.services import unit_supersede
    from selection.models import MemoryChange, MemoryUnit, UnitLink

    fields = {**NEW, "subject": "ship-rule", "facet": "criterion", "valid_from": "2026-11-01T00:00:00Z"}
    write = unit_supersede(actor=people["lead"], project=sift, targets=["sf-rule-beat-baseline"], fields=fields,
                           via="command")  # fmt: skip
    old = MemoryUnit.objects.get(uid="sf-rule-beat-baseline")
    new = MemoryUnit.objects.get(uid=write.unit)
    assert old.valid_to == new.valid_from
    assert UnitLink.objects.filter(source=new, target=old, kind="supersedes").exists()
    assert write.document["closed"] == ["sf-rule-beat-baseline"]
    kinds = list(MemoryChange.objects.filter(sequence__in=write.document["sequences"]).values_list("kind", flat=True))
    assert kinds == ["created", "changed"]
    assert MemoryChange.objects.filter(unit=old).latest("sequence").state["valid_to"] is not None
    assert len(_audit("unit.superseded")) == 1


def test_refute_echo_and_support_link_a_new_or_an_existing_unit(sift, people):
    from selection.memory.writes import services
    from selection.models import UnitLink

    lead = people["lead"]
    refuting = services.unit_refute(actor=lead, project=sift, target="sf-rule-segments", fields=NEW, via="api")
    assert UnitLink.objects.filter(source__uid=refuting.unit, target__uid="sf-rule-segments", kind="refutes").exists()
    support = services.unit_support(
        actor=lead, project=sift, target="sf-rule-segments", source=refuting.unit, via="api"
    )
    assert support.unit == refuting.unit and support.document["links"]["supports"] == ["sf-rule-segments"]
    echo = services.unit_echo(
        actor=lead, project=sift, target=refuting.unit, fields={**NEW, "text": "again"}, via="page"
    )
    assert UnitLink.objects.filter(source__uid=echo.unit, target__uid=refuting.unit, kind="echo_of").exists()
    assert [len(_audit(a)) for a in ("unit.refuted", "unit.supported", "unit.echoed")] == [1, 1, 1]


def test_an_echo_cycle_is_refused_naming_the_field(sift, people):
    from selection.memory.writes import services
    from selection.memory.writes.validation import WriteRefused

    lead = people["lead"]
    first = services.unit_create(actor=lead, project=sift, fields=NEW, via="api")
    echo = services.unit_echo(actor=lead, project=sift, target=first.unit, fields={**NEW, "text": "b"}, via="api")
    before = counts()
    with pytest.raises(WriteRefused) as refused:
        services.unit_echo(actor=lead, project=sift, target=echo.unit, source=first.unit, via="api")
    assert refused.value.field == ("echo_of",) and "cycle" in str(refused.value)
    assert counts() == before


def test_close_and_reopen_an_open_loop(sift, people):
    from selection.memory.writes import services
    from selection.memory.writes.validation import WriteConflict
    from selection.models import MemoryUnit

    loop = MemoryUnit.objects.filter(project=sift, open_loop_status="open").order_by("uid").first()
    services.loop_close(actor=people["lead"], project=sift, uid=loop.uid, via="mcp")
    assert MemoryUnit.objects.get(pk=loop.pk).open_loop_status == "closed"
    with pytest.raises(WriteConflict, match="closed already"):
        services.loop_close(actor=people["lead"], project=sift, uid=loop.uid, via="mcp")
    services.loop_reopen(actor=people["lead"], project=sift, uid=loop.uid, via="mcp")
    assert MemoryUnit.objects.get(pk=loop.pk).open_loop_status == "open"
    assert len(_audit("loop.closed")) == len(_audit("loop.reopened")) == 1


@pytest.mark.parametrize("who", ["reviewer", "auditor", "outsider"])
def test_only_a_lead_or_an_agent_token_writes(sift, people, who):
    from selection.memory.writes.services import unit_create

    before = counts()
    with pytest.raises(AccessDenied, match="may not write memory in sift"):
        unit_create(actor=people[who], project=sift, fields=NEW, via="api")
    assert counts() == before


def test_an_agent_token_writes_only_in_its_project(sift, people, agent):
    from selection.memory.writes.services import unit_create
    from selection.models import Project

    assert unit_create(actor=agent, project=sift, fields=NEW, via="mcp").document["status"] == "active"
    before = counts()
    with pytest.raises(AccessDenied):
        unit_create(actor=agent, project=Project.objects.get(slug="quill"), fields=NEW, via="mcp")
    assert counts() == before


def test_a_structural_conflict_is_refused_unless_the_write_supersedes(sift, people):
    from selection.memory.writes.services import unit_create, unit_supersede
    from selection.memory.writes.validation import WriteConflict

    clash = {**NEW, "subject": "Ship-Rule", "facet": "CRITERION"}
    before = counts()
    with pytest.raises(WriteConflict, match="sf-rule-beat-baseline"):
        unit_create(actor=people["lead"], project=sift, fields=clash, via="api")
    assert counts() == before
    write = unit_supersede(actor=people["lead"], project=sift, targets=["sf-rule-beat-baseline"], fields=clash,
                           via="api")  # fmt: skip
    assert write.document["status"] == "active"


def test_erasure_appends_an_erased_change_and_scrubs_earlier_states(sift, people):
    from selection.memory.erasure import unit_erase
    from selection.memory.writes.services import unit_create
    from selection.models import MemoryChange, MemoryUnit

    write = unit_create(actor=people["lead"], project=sift, fields=NEW, via="api")
    unit = MemoryUnit.objects.get(uid=write.unit)
    erasure = unit_erase(unit=unit, lead=people["lead"], reason="holds a raw user query")
    changes = list(MemoryChange.objects.filter(unit=unit).order_by("sequence"))
    assert [c.kind for c in changes] == ["created", "erased"]
    assert all(c.state["text"] == erasure.mark and c.state["title"] == "" for c in changes)
    assert not MemoryChange.objects.filter(state__text__contains="tail queries").exists()


@pytest.mark.parametrize("action", ["unit.created", "unit.superseded", "loop.closed"])
def test_every_write_is_audited_in_its_transaction(sift, people, action):
    """An audit row that cannot be written takes the write with it: zero rows change."""
    from authority import audit
    from selection.memory.writes import services
    from selection.models import Corpus, MemoryUnit

    class Refused(Exception):
        pass

    def refuse(entry):
        if entry.action == action:
            raise Refused(entry.action)

    loop = MemoryUnit.objects.filter(project=sift, open_loop_status="open").order_by("uid").first()
    writes = {
        "unit.created": lambda: services.unit_create(actor=people["lead"], project=sift, fields=NEW, via="api"),
        "unit.superseded": lambda: services.unit_supersede(
            actor=people["lead"], project=sift, targets=["sf-rule-segments"], fields=NEW, via="api"
        ),
        "loop.closed": lambda: services.loop_close(actor=people["lead"], project=sift, uid=loop.uid, via="api"),
    }
    before, sequence = counts(), Corpus.objects.get(pk=sift.corpus_id).sequence
    audit.register_audit_listener(refuse)
    try:
        with pytest.raises(Refused):
            writes[action]()
    finally:
        audit._listeners.remove(refuse)
    assert counts() == before and Corpus.objects.get(pk=sift.corpus_id).sequence == sequence
    assert MemoryUnit.objects.get(uid="sf-rule-segments").valid_to is None
    assert MemoryUnit.objects.get(pk=loop.pk).open_loop_status == "open"
