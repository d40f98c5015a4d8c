"""What the frame editor reads and writes as text: a typed JSON patch, one-per-line lists, numbers,
and a work type in its short or long form."""

from __future__ import annotations

import copy
import json
from typing import Any

from django import forms

from rules.frame_patch import patch_issues
from selection.corpus.limits import MAX_DEPTH, MAX_PATCH_BYTES


def lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def joined(values) -> str:
    return "\n".join(str(v) for v in values or ())


def number(value: float | None) -> int | float | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_patch(text: str) -> dict:
    """A JSON Merge Patch typed by a person: bounded in size and depth, finite numbers only."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_PATCH_BYTES:
        raise forms.ValidationError(
            f"the patch is {size} bytes; a patch may hold at most {MAX_PATCH_BYTES}"
        )
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as error:
        raise forms.ValidationError(f"not valid JSON: {error}") from error
    except RecursionError:
        raise forms.ValidationError(f"nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:
        raise forms.ValidationError(f"not valid JSON: {error}") from error
    if not isinstance(value, dict):
        raise forms.ValidationError("a JSON Merge Patch here must be an object of frame keys")
    issues = patch_issues(value)
    if issues:
        raise forms.ValidationError([str(issue) for issue in issues])
    return value


def work_type_entry(base: Any, classes: list[str], description: str, cues: list[str]) -> Any:
    """A work type as the editor writes it back: the short form (a class list) unless it was
    written in the long form or now has a description or cues; the long form keeps its x- keys."""
    if not isinstance(base, dict) and not description and not cues:
        return classes
    kept = base if isinstance(base, dict) else {}
    entry = {k: copy.deepcopy(v) for k, v in kept.items() if k.startswith("x-")}
    entry["classes"] = classes
    if description:
        entry["description"] = description
    if cues:
        entry["cues"] = cues
    return entry
