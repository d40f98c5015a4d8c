"""UnitTable: a corpus's units as columns, each Unit made on first use.

A million Unit objects cost a fresh process seconds to unpickle and a gigabyte to hold, while a
selection reads a few hundred of them. The table keeps what every unit has in compact columns:

- ids: one string joined by NUL in the pickle, split back into a sorted list (ids are unique and
  the units sorted by id, so a position is a binary search: `UnitIds`);
- text and title: UTF-8 bytes end to end in one array each, with offsets (in the index cache these
  arrays are memory-mapped: a text is read from disk, and counts in RSS, when its unit is made);
- project and evidence class: int32 codes into small name tables;
- created_at, valid_from, valid_to: int64 microseconds since the epoch (naive, or with a fixed
  `datetime.timezone`, also tabled); any other date goes with the rest;
- everything else a unit can carry (links, open loop, paths, subject, facet, root, a date the
  columns cannot hold) only where it differs from the default: one pickled dict per unit, in one
  bytes array with offsets.

`table[pos]` makes the Unit (equal field for field to the one indexed) and keeps it, so a unit is
made at most once and the same object is returned after that. Routing reads the superseded ids and
the few units it governs (root, paths, subject and facet) without making the others.
"""

from __future__ import annotations

import pickle
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone

import numpy as np

from ..types import Unit

_NONE = np.iinfo(np.int64).min  # no date
_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
_DATES = ("created_at", "valid_from", "valid_to")
_COLUMNS = ("id", "project", "evidence_class", "text", "title", *_DATES)
_SPARSE = tuple(
    (name, default)
    for name, default in (
        (f.name, f.default) for f in Unit.__dataclass_fields__.values() if f.name not in _COLUMNS
    )
)
_SEP = "\x00"


def _strings(values: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        offsets[1:] = np.cumsum([len(b) for b in encoded])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), offsets


def _codes(values: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray]:
    names = tuple(sorted(set(values)))
    at = {name: i for i, name in enumerate(names)}
    return names, np.fromiter((at[v] for v in values), dtype=np.int32, count=len(values))


class UnitTable(Sequence[Unit]):
    """The units of a corpus in id order, as columns (see the module docstring)."""

    def __init__(self, units: Sequence[Unit]):
        n = len(units)
        self.ids: list[str] = [u.id for u in units]
        if any(self.ids[i] >= self.ids[i + 1] for i in range(n - 1)):
            raise ValueError("UnitTable needs units sorted by id, without duplicates")
        self.projects, self.project_codes = _codes([u.project for u in units])
        self.classes, self.class_codes = _codes([u.evidence_class for u in units])
        self._text, self._text_at = _strings([u.text for u in units])
        self._title, self._title_at = _strings([u.title for u in units])
        zones: list[object] = [None]
        zone_at: dict[object, int] = {None: 0}
        self._dates = np.full((n, len(_DATES)), _NONE, dtype=np.int64)
        self._date_zones = np.zeros((n, len(_DATES)), dtype=np.int8)
        extras: list[bytes] = []
        superseded: set[str] = set()
        routed: list[int] = []
        for pos, u in enumerate(units):
            extra = {name: value for name, default in _SPARSE if (value := getattr(u, name)) != default}
            for j, name in enumerate(_DATES):
                value = getattr(u, name)
                if value is None:
                    continue
                zone = value.tzinfo
                if type(value) is not datetime or value.fold or not (
                    zone is None or type(zone) is timezone
                ):
                    extra[name] = value  # kept as it is
                    continue
                if zone not in zone_at:
                    if len(zones) == 127:
                        extra[name] = value
                        continue
                    zone_at[zone] = len(zones)
                    zones.append(zone)
                self._date_zones[pos, j] = zone_at[zone]
                self._dates[pos, j] = (
                    (value - _EPOCH) if zone is None else (value - _EPOCH_UTC)
                ) // _ONE_US
            extras.append(pickle.dumps(extra, protocol=pickle.HIGHEST_PROTOCOL) if extra else b"")
            superseded.update(u.supersedes)
            if u.root or u.paths or (u.subject and u.facet):
                routed.append(pos)
        self._zones = tuple(zones)
        self._extra = np.frombuffer(b"".join(extras), dtype=np.uint8).copy()
        self._extra_at = np.zeros(n + 1, dtype=np.int64)
        if n:
            self._extra_at[1:] = np.cumsum([len(b) for b in extras])
        self.superseded: frozenset[str] = frozenset(superseded)
        self.routed = np.asarray(routed, dtype=np.int64)  # units routing governs or owns
        self._made: list[Unit | None] = [None] * n
        self.index = UnitIds(self.ids)

    # pickled without the made units; ids as one string (a million strings unpickle slowly)
    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_made", "index", "ids")}
        if any(_SEP in uid for uid in self.ids):
            state["ids"] = self.ids  # an id holding NUL: kept as a list
        else:
            state["ids_joined"] = _SEP.join(self.ids)
            state["count"] = len(self.ids)
        return state

    def __setstate__(self, state: dict) -> None:
        joined = state.pop("ids_joined", None)
        count = state.pop("count", None)
        self.__dict__.update(state)
        if joined is not None:
            self.ids = joined.split(_SEP) if count else []
        self._made = [None] * len(self.ids)
        self.index = UnitIds(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, pos):
        if isinstance(pos, slice):
            return tuple(self[i] for i in range(*pos.indices(len(self.ids))))
        unit = self._made[pos]
        if unit is None:
            pos = range(len(self.ids))[pos]
            unit = self._made[pos] = self._make(pos)
        return unit

    def __iter__(self) -> Iterator[Unit]:
        for pos in range(len(self.ids)):
            yield self[pos]

    def __contains__(self, unit) -> bool:
        pos = self.index.get(getattr(unit, "id", None))
        return pos is not None and self[pos] == unit

    def _string(self, blob: np.ndarray, offsets: np.ndarray, pos: int) -> str:
        return str(blob.data[offsets[pos] : offsets[pos + 1]], "utf-8")

    def _date(self, pos: int, j: int) -> datetime | None:
        value = int(self._dates[pos, j])
        if value == _NONE:
            return None
        zone = self._zones[self._date_zones[pos, j]]
        if zone is None:
            return _EPOCH + timedelta(microseconds=value)
        return (_EPOCH_UTC + timedelta(microseconds=value)).astimezone(zone)

    def _make(self, pos: int) -> Unit:
        start, end = self._extra_at[pos], self._extra_at[pos + 1]
        extra = pickle.loads(self._extra.data[start:end]) if end > start else {}
        fields = {
            "id": self.ids[pos],
            "project": self.projects[self.project_codes[pos]],
            "evidence_class": self.classes[self.class_codes[pos]],
            "text": self._string(self._text, self._text_at, pos),
            "title": self._string(self._title, self._title_at, pos),
        }
        for j, name in enumerate(_DATES):
            fields[name] = self._date(pos, j)
        fields.update(extra)
        return Unit(**fields)

    def project_of(self, pos: int) -> str:
        return self.projects[self.project_codes[pos]]

    def routed_units(self) -> list[Unit]:
        """The units routing reads besides the superseded ids: root, paths, or subject and facet."""
        return [self[int(pos)] for pos in self.routed]

    def by_id(self) -> UnitsById:
        return UnitsById(self)


class UnitIds(Mapping[str, int]):
    """Unit id -> position over ids sorted ascending, by binary search (no dict of a million)."""

    __slots__ = ("ids",)

    def __init__(self, ids: list[str]):
        self.ids = ids

    def get(self, uid, default=None):
        ids = self.ids
        if type(uid) is not str:
            return default
        at = bisect_left(ids, uid)
        return at if at < len(ids) and ids[at] == uid else default

    def __getitem__(self, uid: str) -> int:
        at = self.get(uid)
        if at is None:
            raise KeyError(uid)
        return at

    def __contains__(self, uid) -> bool:
        return self.get(uid) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


class UnitsById(Mapping[str, Unit]):
    """Unit id -> Unit over a UnitTable, making only the units asked for."""

    __slots__ = ("table",)

    def __init__(self, table: UnitTable):
        self.table = table

    def get(self, uid, default=None):
        pos = self.table.index.get(uid)
        return default if pos is None else self.table[pos]

    def __getitem__(self, uid: str) -> Unit:
        return self.table[self.table.index[uid]]

    def __contains__(self, uid) -> bool:
        return uid in self.table.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.table.ids)

    def __len__(self) -> int:
        return len(self.table)
