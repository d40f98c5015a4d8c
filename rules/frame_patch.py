"""Frame snapshots as plain JSON: validate, patch (RFC 7386), compute a patch, split and rebase one; no Django.

Validation reuses the corpus format's own checker (selection.corpus.frames.check_frame) so a frame a
proposal produces obeys exactly the rules an imported corpus.yaml frame does; this module only adds
what proposals need on top: issues keyed by their path in the frame, duplicate checks and warnings.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from selection.corpus import limits
from selection.corpus.frames import (
    FRAME_KEYS,
    METRICS,
    check_frame,
    listed_classes,
    merge_patch,
)
from selection.corpus.places import Place, Report, format_path
from selection.engine.gates import GATES_KEYS, LIMIT_BOUNDS

__all__ = [
    "FRAME_KEYS",
    "GATES_KEYS",
    "LIMIT_BOUNDS",
    "METRICS",
    "FrameIssue",
    "KeyConflict",
    "apply_patch",
    "compute_patch",
    "frame_classes",
    "frame_issues",
    "MAX_ABLATION_PARTS",
    "patch_issues",
    "patch_only",
    "patch_parts",
    "patch_paths",
    "paths_overlap",
    "rebase_conflicts",
    "resolve_rebase",
    "unknown_class_warnings",
]

@dataclass(frozen=True)
class FrameIssue:
    """One problem with a frame, at a path like `work_types.implementation-review[2]`."""

    path: tuple[str | int, ...]
    message: str

    @property
    def where(self) -> str:
        return format_path(self.path) if self.path else "patch"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class _PathReport(Report):
    """The corpus Report, also keeping each issue's path inside the frame (not a file location)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[FrameIssue] = []

    def add(self, place: Place, message: str, field: str | None = None) -> None:
        super().add(place, message, field)
        path = place.path
        # a missing required key or a limit without a bound is reported at its parent mapping
        if field and (not path or path[-1] != field):
            path = path + (field,)
        self.found.append(FrameIssue(tuple(path), message))


def patch_issues(patch: Any) -> list[FrameIssue]:
    """Limits on any patch, whatever it patches: size, depth, values JSON and text can hold."""
    if limits.depth(patch) > limits.MAX_DEPTH:
        return [FrameIssue((), f"nests deeper than {limits.MAX_DEPTH} levels")]
    issues = [
        FrameIssue(tuple(path), problem) for path, problem in limits.value_problems(patch)
    ][:20]
    if issues:
        return issues
    try:
        size = len(json.dumps(patch, allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError) as error:
        return [FrameIssue((), f"is not JSON: {error}")]
    if size > limits.MAX_PATCH_BYTES:
        return [
            FrameIssue((), f"is {size} bytes of JSON; a patch may hold {limits.MAX_PATCH_BYTES}")
        ]
    return []


def apply_patch(snapshot: Mapping[str, Any], patch: Any) -> tuple[dict[str, Any], list[FrameIssue]]:
    """The frame after a JSON Merge Patch, or issues when the patch is not a frame patch at all."""
    if not isinstance(patch, dict):
        return dict(snapshot), [
            FrameIssue((), "a patch is a JSON Merge Patch: a mapping of frame keys")
        ]
    issues = patch_issues(patch)
    if issues:
        return dict(snapshot), issues
    return merge_patch(copy.deepcopy(dict(snapshot)), patch), []


def frame_issues(frame: Any, *, project: str, declared: Collection[str]) -> list[FrameIssue]:
    """Every reason `frame` is not a valid version-1 ProjectFrame; empty when it is one."""
    report = _PathReport()
    check_frame(frame, Place("frame"), report, project=project, declared=declared)
    issues = list(report.found)
    if isinstance(frame, dict):
        issues += _duplicates(frame)
    return issues


def _duplicates(frame: Mapping[str, Any]) -> list[FrameIssue]:
    # the corpus checker accepts a repeated class; in a preference order a repeat is ambiguous
    lists: list[tuple[tuple[str | int, ...], Any]] = [
        (("scope",), frame.get("scope")),
        (("default_classes",), frame.get("default_classes")),
        (("open_loop_work_types",), frame.get("open_loop_work_types")),
    ]
    work_types = frame.get("work_types")
    if isinstance(work_types, dict):
        for name, entry in sorted(work_types.items()):
            path = ("work_types", name) + (("classes",) if isinstance(entry, dict) else ())
            lists.append((path, listed_classes(entry)))
    issues = []
    for path, values in lists:
        if not isinstance(values, list):
            continue
        seen: dict[Any, int] = {}
        for index, value in enumerate(values):
            if not isinstance(value, str):
                continue
            if value in seen:
                issues.append(
                    FrameIssue(
                        path + (index,), f'"{value}" is listed twice (first at [{seen[value]}])'
                    )
                )
            else:
                seen[value] = index
    return issues


def frame_classes(frame: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """Every evidence class a frame names, with its path: default classes, then work types."""
    named: list[tuple[tuple[str | int, ...], str]] = []
    for index, cls in enumerate(frame.get("default_classes") or ()):
        named.append((("default_classes", index), cls))
    for name, entry in sorted((frame.get("work_types") or {}).items()):
        long_form = ("classes",) if isinstance(entry, dict) else ()
        for index, cls in enumerate(listed_classes(entry) or ()):
            named.append((("work_types", name, *long_form, index), cls))
    return named


def unknown_class_warnings(
    frame: Mapping[str, Any], *, carried: Collection[str], scope: Iterable[str]
) -> list[str]:
    """A warning per class that no unit in scope carries: legal, but it can never admit anything."""
    scope_text = ", ".join(scope)
    return [
        f'{format_path(path)}: no unit in scope ({scope_text}) carries the class "{cls}"'
        for path, cls in frame_classes(frame)
        if cls not in carried
    ]


def compute_patch(base: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
    """The smallest JSON Merge Patch from `base` to `target`: changed keys only, lists whole."""
    patch: dict[str, Any] = {}
    for key in sorted(set(base) | set(target)):
        if key not in target or target[key] is None:
            if key in base:
                patch[key] = None
        elif key not in base:
            patch[key] = copy.deepcopy(target[key])
        elif isinstance(base[key], dict) and isinstance(target[key], dict):
            inner = compute_patch(base[key], target[key])
            if inner:
                patch[key] = inner
        elif base[key] != target[key]:
            patch[key] = copy.deepcopy(target[key])
    return patch


# --- the parts of a patch (ablation, split) -----------------------------------------------------

# a patch of more parts than this is backtested whole only: each part costs two more replays of every task
MAX_ABLATION_PARTS = 6
PER_KEY_PARTS = ("work_types",)  # a mapping of these is patched key by key: each key is a part


def patch_parts(patch: Any) -> list[str]:
    """The parts of a merge patch, each the path of one patched field: `work_types.<name>` for each
    work type it sets or removes, the key itself for any other top-level field (`scope`,
    `class_pull`, `gates`, ...). Sorted, so the same patch always gives the same parts."""
    if not isinstance(patch, Mapping):
        return []
    parts: list[str] = []
    for key in sorted(patch):
        value = patch[key]
        if key in PER_KEY_PARTS and isinstance(value, Mapping) and value:
            parts.extend(f"{key}.{name}" for name in sorted(value))
        else:
            parts.append(key)
    return parts


def patch_only(patch: Mapping[str, Any], parts: Collection[str]) -> dict[str, Any]:
    """The merge patch restricted to `parts` (paths from patch_parts): applying it changes those
    fields exactly as the whole patch does, and nothing else."""
    wanted = set(parts)
    out: dict[str, Any] = {}
    for part in patch_parts(patch):
        if part not in wanted:
            continue
        head, _, name = part.partition(".")
        if name and head in PER_KEY_PARTS and isinstance(patch.get(head), Mapping) and name in patch[head]:
            out.setdefault(head, {})[name] = copy.deepcopy(patch[head][name])
        else:
            out[part] = copy.deepcopy(patch[part])
    return out


# --- rebase: a patch written over one version, re-applied over another ----------------------


Path = tuple[str, ...]
ABSENT = object()  # a key a frame or a patch does not have
MINE, THEIRS = "mine", "theirs"  # a rebase conflict's two resolutions: the proposal's or current's


def patch_paths(patch: Any) -> list[Path]:
    """The keys a merge patch sets or removes, as paths to its leaves (a nested mapping merges, so
    its own keys are the ones touched), sorted."""
    paths: list[Path] = []

    def walk(value: Any, prefix: Path) -> None:
        if isinstance(value, dict) and (value or not prefix):
            for key in sorted(value):
                walk(value[key], prefix + (str(key),))
        elif prefix:
            paths.append(prefix)

    walk(patch, ())
    return paths


def paths_overlap(a: Path, b: Path) -> bool:
    """Two touched keys overlap when one is the other or lies inside it."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _value_at(frame: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(frame, dict) or key not in frame:
            return ABSENT
        frame = frame[key]
    return frame


def _patched_value(patch: Any, path: Path) -> Any:
    value = _value_at(patch, path)
    return ABSENT if value is None else value


@dataclass(frozen=True)
class KeyConflict:
    """A key the proposal changes that the current version also changed since the proposal's base.

    Values are JSON text, "(absent)" where the key does not exist.
    """

    path: Path
    base: str
    current: str
    proposed: str

    @property
    def key(self) -> str:
        return format_path(self.path)


def _shown(value: Any) -> str:
    return "(absent)" if value is ABSENT else json.dumps(value, sort_keys=True)


def rebase_conflicts(base: Mapping[str, Any], current: Mapping[str, Any], patch: Any) -> list[KeyConflict]:
    """The keys of `patch` (written over `base`) that `current` changed since `base` to another
    value than the patch gives them: re-applying the patch would silently overwrite that change."""
    conflicts = []
    for path in patch_paths(patch):
        before, now = _value_at(base, path), _value_at(current, path)
        mine = _patched_value(patch, path)
        if before != now and mine != now:
            conflicts.append(KeyConflict(path, _shown(before), _shown(now), _shown(mine)))
    return conflicts


def _without(patch: dict[str, Any], path: Path) -> dict[str, Any]:
    """`patch` minus the leaf at `path`, dropping mappings left empty."""
    head, rest = path[0], path[1:]
    result = dict(patch)
    if not rest or not isinstance(result.get(head), dict):
        result.pop(head, None)
        return result
    inner = _without(result[head], rest)
    if inner:
        result[head] = inner
    else:
        result.pop(head)
    return result


def resolve_rebase(
    patch: dict[str, Any], conflicts: Iterable[KeyConflict], resolutions: Mapping[str, str]
) -> tuple[dict[str, Any], list[KeyConflict]]:
    """The patch to re-apply once each conflict is resolved: "mine" keeps the proposal's value,
    "theirs" keeps the current version's (the key leaves the patch). Returns the patch and the
    conflicts still unresolved (none resolved, or an unknown choice)."""
    unresolved = []
    result = copy.deepcopy(patch)
    for conflict in conflicts:
        choice = resolutions.get(conflict.key)
        if choice == THEIRS:
            result = _without(result, conflict.path)
        elif choice != MINE:
            unresolved.append(conflict)
    return result, unresolved
