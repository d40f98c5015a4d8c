"""Two frame snapshots side by side, field by field, with moved and changed list items marked; pure, no Django."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from selection.corpus.frames import ADMISSION_KEYS, FRAME_KEYS, WORK_TYPE_KEYS
from selection.engine.gates import GATES_KEYS

from .frame_patch import ABSENT


@dataclass(frozen=True)
class Mark:
    """One shown value in a diff column; mark is kept | added | removed | moved | changed."""

    text: str
    mark: str = "kept"


@dataclass(frozen=True)
class FieldDiff:
    """One field of two frames side by side; status is same | changed | added | removed."""

    path: str
    status: str
    left: tuple[Mark, ...]
    right: tuple[Mark, ...]

    @property
    def changed(self) -> bool:
        return self.status != "same"


_KEYED = {"gates": GATES_KEYS, "admission": ADMISSION_KEYS}  # mappings diffed key by key, in this order


def diff_frames(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[FieldDiff]:
    """Field by field; work types one row each (a row per part in the long form), gates and the stop
    rule a row per key; ordered lists item by item with moves marked."""
    rows: list[FieldDiff] = []
    extras = sorted(k for k in set(a) | set(b) if k not in FRAME_KEYS)
    for key in (*FRAME_KEYS, *extras):
        left, right = a.get(key, ABSENT), b.get(key, ABSENT)
        if left is ABSENT and right is ABSENT:
            continue
        if key == "work_types" and _mapping_or_absent(left) and _mapping_or_absent(right):
            left_map = left if isinstance(left, dict) else {}
            right_map = right if isinstance(right, dict) else {}
            for name in sorted(set(left_map) | set(right_map)):
                rows.extend(
                    _diff_work_type(name, left_map.get(name, ABSENT), right_map.get(name, ABSENT))
                )
        elif key in _KEYED and _mapping_or_absent(left) and _mapping_or_absent(right):
            # a row per gate and per stop-rule key: "admission.floor 0.6 -> 0.4", not two blobs
            left_map = left if isinstance(left, dict) else {}
            right_map = right if isinstance(right, dict) else {}
            names = [k for k in _KEYED[key] if k in left_map or k in right_map]
            names += sorted(k for k in set(left_map) | set(right_map) if k not in _KEYED[key])
            for name in names:
                rows.append(
                    _diff_value(
                        f"{key}.{name}", left_map.get(name, ABSENT), right_map.get(name, ABSENT)
                    )
                )
        else:
            rows.append(_diff_value(key, left, right))
    return rows


def _diff_work_type(name: str, left: Any, right: Any) -> list[FieldDiff]:
    """One row for a short-form work type on both sides; one row per part (classes, description,
    cues) when either side is written in the long form."""
    if not isinstance(left, dict) and not isinstance(right, dict):
        return [_diff_value(f"work_types.{name}", left, right)]

    def part(value: Any, key: str) -> Any:
        if value is ABSENT:
            return ABSENT
        if isinstance(value, dict):
            return value.get(key, ABSENT)
        return value if key == "classes" else ABSENT

    rows = []
    for key in WORK_TYPE_KEYS:
        before, after = part(left, key), part(right, key)
        if before is ABSENT and after is ABSENT:
            continue
        rows.append(_diff_value(f"work_types.{name}.{key}", before, after))
    return rows


def _mapping_or_absent(value: Any) -> bool:
    return value is ABSENT or isinstance(value, dict)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _diff_value(path: str, left: Any, right: Any) -> FieldDiff:
    if left is ABSENT:
        return FieldDiff(path, "added", (), _as_marks(right, "added"))
    if right is ABSENT:
        return FieldDiff(path, "removed", _as_marks(left, "removed"), ())
    if isinstance(left, list) and isinstance(right, list):
        left_marks, right_marks = diff_lists([_text(v) for v in left], [_text(v) for v in right])
        status = "same" if left == right else "changed"
        return FieldDiff(path, status, left_marks, right_marks)
    if left == right:
        return FieldDiff(path, "same", (Mark(_text(left)),), (Mark(_text(right)),))
    return FieldDiff(
        path, "changed", (Mark(_text(left), "changed"),), (Mark(_text(right), "changed"),)
    )


def _as_marks(value: Any, mark: str) -> tuple[Mark, ...]:
    if isinstance(value, list):
        return tuple(Mark(_text(v), mark) for v in value)
    return (Mark(_text(value), mark),)


def diff_lists(left: list[str], right: list[str]) -> tuple[tuple[Mark, ...], tuple[Mark, ...]]:
    """Item-by-item marks: the longest common runs stay kept; other items on both sides moved."""
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    kept_left: set[int] = set()
    kept_right: set[int] = set()
    for block in matcher.get_matching_blocks():
        kept_left.update(range(block.a, block.a + block.size))
        kept_right.update(range(block.b, block.b + block.size))
    in_right, in_left = set(right), set(left)
    left_marks = tuple(
        Mark(v, "kept" if i in kept_left else ("moved" if v in in_right else "removed"))
        for i, v in enumerate(left)
    )
    right_marks = tuple(
        Mark(v, "kept" if i in kept_right else ("moved" if v in in_left else "added"))
        for i, v in enumerate(right)
    )
    return left_marks, right_marks
