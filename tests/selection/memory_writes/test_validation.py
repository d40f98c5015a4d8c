"""One validator for import and writes: a hypothesis-generated invalid write is refused naming its
field, and no row changes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.selection.memory_writes.conftest import counts

BASE = {"id": "sf-written", "class": "design_note", "title": "A note", "text": "A short note on tail queries."}
IDENT = st.from_regex(r"[a-z][a-z0-9_]{2,12}", fullmatch=True)


def _with(**changes):
    return {**BASE, **changes}


# (strategy of an invalid unit, the field the refusal names)
INVALID = st.one_of(
    IDENT.filter(lambda c: c not in {"design_note", "design_principle"}).map(
        lambda c: (_with(**{"class": "zz" + c}), "class")
    ),
    IDENT.map(lambda t: (_with(supersedes=["missing-" + t]), "supersedes")),
    IDENT.map(lambda t: (_with(refutes=["missing-" + t]), "refutes")),
    IDENT.map(lambda t: (_with(echo_of="missing-" + t), "echo_of")),
    st.text(min_size=0, max_size=20).map(lambda t: (_with(text=t + "\x00" + t), "text")),
    st.text(min_size=0, max_size=5).map(lambda t: (_with(title="\x00" + t), "title")),
    st.integers(min_value=301, max_value=2000).map(lambda n: (_with(title="t" * n), "title")),
    st.sampled_from(["Upper", "with space", "-dash", "é", ""]).map(lambda i: (_with(id=i), "id")),
    st.just((_with(supersedes=["sf-written"]), "supersedes")),
    st.just((_with(text="   "), "text")),
    st.just((_with(valid_from="2026-10-02T00:00:00Z", valid_to="2026-10-01T00:00:00Z"), "valid_to")),
    st.just((_with(valid_from="2026-10-02T00:00:00"), "valid_from")),
    st.just((_with(subject=""), "subject")),
    st.just((_with(open_loop={"status": "half", "kind": "todo"}), "open_loop")),
    st.just((_with(importance=3), "importance")),
    st.just((_with(text=1), "text")),
    st.just((_with(id="sf-rule-segments"), "id")),  # taken
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=INVALID)
def test_an_invalid_write_is_refused_naming_its_field_and_changes_nothing(sift, people, case):
    from selection.memory.writes.services import unit_create
    from selection.memory.writes.validation import WriteRefused

    fields, field = case
    before = counts()
    with pytest.raises(WriteRefused) as refused:
        unit_create(actor=people["lead"], project=sift, fields=fields, via="api")
    assert refused.value.field[:1] == (field,), (fields, str(refused.value))
    assert field in str(refused.value)
    assert counts() == before


def test_an_over_long_text_is_refused_as_the_reader_refuses_an_over_long_line(sift, people):
    from selection.corpus.limits import MAX_LINE_BYTES
    from selection.memory.writes.services import unit_create
    from selection.memory.writes.validation import WriteRefused

    before = counts()
    with pytest.raises(WriteRefused, match="units.jsonl line") as refused:
        unit_create(actor=people["lead"], project=sift, fields=_with(text="x" * MAX_LINE_BYTES), via="api")
    assert refused.value.field == ("text",)
    assert counts() == before


def test_a_valid_write_passes_the_same_checks_an_import_does(sift, people):
    from selection.corpus.places import Report
    from selection.corpus.sources import JsonLine
    from selection.corpus.units import check_units
    from selection.memory.writes.records import unit_record
    from selection.memory.writes.services import unit_create
    from selection.models import MemoryUnit

    write = unit_create(actor=people["lead"], project=sift, fields=_with(supports=["sf-rule-segments"]), via="api")
    record = unit_record(MemoryUnit.objects.select_related("project").get(uid=write.unit))
    report = Report()
    (checked,) = check_units([JsonLine(1, record, ())], report, {"sift"}, unreadable_ids={"sf-rule-segments"})
    assert not report.issues and checked.unit.supports == ("sf-rule-segments",)
