"""UnitTable: a persisted index's units as columns give back every unit exactly, make only the units
a selection reads, and route as the units themselves do."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from selection.engine.index import CorpusIndex
from selection.engine.index.units import UnitTable
from selection.engine.routing.route import RoutingCorpus
from selection.engine.types import OpenLoop, Unit

PLUS2 = timezone(timedelta(hours=2))


def _units() -> list[Unit]:
    return [
        Unit("a1", "alpha", "decision", "plain text", title="Plain",
             created_at=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)),
        Unit("a2", "alpha", "constraint", "naïve dates — ünïcode ✓",
             created_at=datetime(1969, 12, 31, 23, 59, tzinfo=UTC),
             valid_from=datetime(2025, 5, 5), valid_to=datetime(2027, 1, 1, 0, 0, 0, 1)),
        Unit("a3", "beta", "open_item", "an offset and a zone", created_at=datetime(2026, 3, 1, 12, tzinfo=PLUS2),
             valid_to=datetime(2026, 3, 29, 2, 30, tzinfo=ZoneInfo("Europe/Berlin")),
             open_loop=OpenLoop(status="open", kind="todo")),
        Unit("a4", "beta", "decision", "links", supersedes=("a1",), echo_of="a2", supports=("a3",),
             refutes=("a1", "a2")),
        Unit("b1", "alpha", "constraint", "", root=True),
        Unit("b2", "alpha", "constraint", "area", paths=("src/**",), subject="db", facet="engine"),
        Unit("b3", "gamma", "note", "x" * 5000, title="long"),
    ]


def _round_trip(table: UnitTable) -> UnitTable:
    return pickle.loads(pickle.dumps(table, protocol=pickle.HIGHEST_PROTOCOL))


def test_every_unit_comes_back_field_for_field():
    units = _units()
    table = _round_trip(UnitTable(units))
    assert len(table) == len(units)
    assert tuple(table) == tuple(units)
    for mine, theirs in zip(table, units, strict=True):
        for name in ("created_at", "valid_from", "valid_to"):
            a, b = getattr(mine, name), getattr(theirs, name)
            assert (a is None) == (b is None)
            if a is not None:  # what a trace writes: the same instant, zone and text
                assert a.isoformat() == b.isoformat() and a.utcoffset() == b.utcoffset()
                assert a.tzinfo == b.tzinfo
        assert mine.as_dict() == theirs.as_dict()
    assert table[-1] == units[-1] and table[1:3] == tuple(units[1:3])


def test_a_unit_is_made_once_and_only_when_read():
    table = _round_trip(UnitTable(_units()))
    assert sum(u is not None for u in table._made) == 0
    first = table[2]
    assert table[2] is first and table.index.get("a3") == 2
    assert sum(u is not None for u in table._made) == 1
    assert table.index.get("zz") is None and table.index.get(None) is None and "a4" in table.index


def test_ids_holding_nul_survive():
    units = [Unit("a\x00b", "p", "note", "one"), Unit("a\x00c", "p", "note", "two")]
    assert tuple(_round_trip(UnitTable(units))) == tuple(units)


def test_routing_reads_the_table_as_it_reads_the_units():
    units = _units()
    table = _round_trip(UnitTable(units))
    of_units, of_table = RoutingCorpus(tuple(units)), RoutingCorpus(table)
    # only the governed units were made
    assert {u.id for u in table._made if u is not None} == {"b1", "b2"}
    assert of_table.superseded == of_units.superseded == frozenset({"a1"})
    assert of_table.root_and_areas == of_units.root_and_areas
    assert of_table.owners == of_units.owners
    assert of_table.own("b1", "alpha") == of_units.own("b1", "alpha")
    assert of_table.own("a1", "alpha") is None and of_table.by_id.get("nope") is None


def test_a_pickled_index_scopes_and_finds_units_without_making_them():
    index = CorpusIndex.build(_units())
    loaded = pickle.loads(pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL))
    assert isinstance(loaded.units, UnitTable)
    scope = frozenset({"beta", "gamma"})
    assert loaded.scope_mask(scope).tolist() == index.scope_mask(scope).tolist()
    assert loaded.position["a4"] == index.position["a4"] and loaded.position.get("x") is None
    assert sum(u is not None for u in loaded.units._made) == 0
    assert loaded.unit("b3") == index.unit("b3") and loaded.neighbours("a1") == index.neighbours("a1")
