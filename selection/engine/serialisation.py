"""JSON forms of the engine's frozen dataclasses: keys in field order, exact round trip."""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from datetime import datetime
from enum import Enum
from functools import cache
from typing import Any, Union

_PLAIN = (str, int, bool, type(None))
_INLINE = frozenset(_PLAIN)  # values a converter passes through without a call
_field_names: dict[type, tuple[str, ...] | None] = {}
_converters: dict[type, Callable[[Any], dict] | None] = {}


def _names(cls: type) -> tuple[str, ...] | None:
    """Field names of a dataclass type (cached: a trace has thousands of records), else None."""
    try:
        return _field_names[cls]
    except KeyError:
        names = tuple(f.name for f in fields(cls)) if is_dataclass(cls) else None
        _field_names[cls] = names
        return names


def _converter(cls: type) -> Callable[[Any], dict] | None:
    """A function giving a dataclass's JSON form, compiled once per dataclass type (a trace holds
    thousands of records): each field read by name, passed through when its value is a plain type
    or a finite float, else handed to to_jsonable. Exactly what to_jsonable's generic path gives,
    without a call per plain field. None for a type that is not a dataclass."""
    try:
        return _converters[cls]
    except KeyError:
        pass
    names = _names(cls)
    if names is None:
        _converters[cls] = None
        return None
    lines = ["def convert(value):"]
    for i, name in enumerate(names):
        lines.append(f"    x{i} = value.{name}")
        # x - x == 0.0 holds for every finite float and fails for inf and nan (to_jsonable raises)
        lines.append(
            f"    if not (type(x{i}) in inline or (type(x{i}) is float and x{i} - x{i} == 0.0)):"
            f" x{i} = to_jsonable(x{i})"
        )
    lines.append("    return {" + ", ".join(f"{name!r}: x{i}" for i, name in enumerate(names)) + "}")
    namespace: dict[str, Any] = {"inline": _INLINE, "to_jsonable": to_jsonable}
    exec(compile("\n".join(lines), f"<to_jsonable {cls.__qualname__}>", "exec"), namespace)  # noqa: S102
    _converters[cls] = convert = namespace["convert"]
    return convert


def to_jsonable(value: Any) -> Any:
    """JSON form: dataclass -> dict in field order, tuple -> list, datetime -> ISO 8601."""
    cls = type(value)
    if cls in _INLINE:
        return value
    if cls is float:
        if not math.isfinite(value):
            raise ValueError(f"non-finite float {value!r} has no JSON form")
        return value
    if cls is tuple or cls is list:
        return [v if type(v) in _INLINE else to_jsonable(v) for v in value]
    convert = _converters[cls] if cls in _converters else _converter(cls)
    if convert is not None:
        return convert(value)
    if isinstance(value, Enum):
        return value._value_  # what .value returns, without the descriptor (a call per member)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (tuple, list)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        # sorted so that a mapping's insertion order never reaches a digest or a diff
        return {str(k): to_jsonable(value[k]) for k in sorted(value)}
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"non-finite float {value!r} has no JSON form")
        return value
    if value is None or isinstance(value, (str, int, bool)):
        return value
    # numpy scalars and the like must be converted by the engine before they reach a record
    raise TypeError(f"{type(value).__name__} is not serialisable: {value!r}")


def canonical_json(value: Any) -> str:
    """One string per value: sorted keys, no whitespace; what digests and equality checks use."""
    return json.dumps(to_jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_jsonable(tp: Any, data: Any) -> Any:
    """Rebuild a value of type `tp` from its to_jsonable() form."""
    if tp is Any:
        return data
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) != 1:
            raise TypeError(f"ambiguous union {tp!r}")
        return from_jsonable(options[0], data)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_jsonable(args[0], v) for v in data)
        return tuple(from_jsonable(a, v) for a, v in zip(args, data, strict=True))
    if origin in (Mapping, dict, typing.Mapping) or tp in (dict, Mapping):
        value_type = args[1] if len(args) == 2 else Any
        return {k: from_jsonable(value_type, v) for k, v in data.items()}
    if isinstance(tp, type) and is_dataclass(tp):
        hints = _hints(tp)
        names = {f.name for f in fields(tp) if f.init}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"{tp.__name__}: unknown keys {sorted(unknown)}")
        return tp(**{k: from_jsonable(hints[k], v) for k, v in data.items()})
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp(data)
    if tp is datetime:
        return None if data is None else datetime.fromisoformat(data)
    if tp is float:
        return float(data)
    return data


class Serialisable:
    """as_dict(): JSON-ready, keys in field order; from_dict() rebuilds an equal object."""

    def as_dict(self) -> dict:
        return to_jsonable(self)

    @classmethod
    def from_dict(cls, data: Mapping):
        return from_jsonable(cls, data)
