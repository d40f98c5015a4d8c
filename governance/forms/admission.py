"""The editor's stop-rule fields: the frame's `admission` mapping key by key, checked by the corpus parser.

A field shows the current frame's value; a blank field leaves its key as it is (absent stays absent),
so the patch holds only the keys a person changed, as a raw `{"admission": {...}}` patch would. "Drop"
removes single declared keys (each then reads its default, as `null` in a raw patch does); the rule
"none" keeps the keys for later; "remove" drops the whole mapping (the engine's default stop rule then applies).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from django import forms

from rules.frame_patch import FrameIssue, frame_issues
from selection.corpus.frames import ADMISSION_KEYS
from selection.engine.types import ADMISSION_RULES, DEFAULT_ADMISSION, AdmissionPolicy

RULE = "admission_rule"
REMOVE = "admission_remove"
DROP = "admission_drop"
VALUE_KEYS = tuple(k for k in ADMISSION_KEYS if k != "rule")  # floor, unlisted, tier_cap, unlisted_floor
INTEGER_KEYS = ("unlisted", "tier_cap")
_DEFAULTS = AdmissionPolicy()
RULE_HELP = (
    "relative: a weak item stops its class before the budget does; unlisted: only the unlisted floor "
    "stops; none: the budget alone ends the bundle"
)
# what a frame that declares no stop rule gets
ENGINE_DEFAULT = (
    f"the engine default ({DEFAULT_ADMISSION.rule}, unlisted_floor {DEFAULT_ADMISSION.unlisted_floor:g})"
)
VALUE_HELP = {
    "floor": "an item is stopped when its evidence is below this share of the best admitted in its class (0 to 1)",
    "unlisted": "how many items of classes the work type does not list may enter",
    "tier_cap": "the first listed class admits at most this many, the second half as many, the third a third "
    "(rounded up)",
    "unlisted_floor": "an item of an unlisted class needs query and objective relevance of at least this (0 to 1)",
}


def field_name(key: str) -> str:
    return f"admission_{key}"


def _default(key: str) -> str:
    value = getattr(_DEFAULTS, key, None)
    return "no limit" if value is None else json.dumps(value)


class AdmissionNumber(forms.CharField):
    """A number as typed: 5 an integer, 5.0 or 0.4 a float (as a raw patch's JSON would read them);
    text that is no number stays text, for the corpus parser to name ("expected an integer, got ...")."""

    def __init__(self, *, key: str, **kwargs):
        step = "1" if key in INTEGER_KEYS else "any"
        kwargs.setdefault("widget", forms.NumberInput(attrs={"step": step}))
        super().__init__(required=False, **kwargs)

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value).strip()
        if not text:
            return None
        for number in (int, float):
            try:
                return number(text)
            except ValueError:
                continue
        return text


def declared(base: Mapping[str, Any]) -> dict[str, Any]:
    value = base.get("admission")
    return value if isinstance(value, dict) else {}


def add_fields(form: forms.Form, base: Mapping[str, Any]) -> None:
    """The rule, one field per other key and "remove", each showing what the frame says now."""
    now = declared(base)
    rule_now = now.get("rule")
    form.fields[RULE] = forms.ChoiceField(
        required=False,
        label="Stop rule",
        choices=[("", "— unchanged —")] + [(r, r) for r in ADMISSION_RULES],
        help_text=f"{RULE_HELP}; " + (f"now {rule_now}" if rule_now else f"not declared: {ENGINE_DEFAULT}"),
    )
    form.initial[RULE] = rule_now if rule_now in ADMISSION_RULES else ""
    for key in VALUE_KEYS:
        shown = f"now {json.dumps(now[key])}" if key in now else f"not declared: {_default(key)}"
        # the labels are the patch's own keys, so what a person types here reads the same in the patch
        form.fields[field_name(key)] = AdmissionNumber(
            # a key the corpus format gains later still gets its field, described in corpus-format.md
            key=key, label=key, help_text=f"{VALUE_HELP.get(key, 'see docs/corpus-format.md')}; {shown}"
        )
        if key in now:
            form.initial[field_name(key)] = now[key]
    droppable = [key for key in VALUE_KEYS if key in now]
    if droppable:
        form.fields[DROP] = forms.MultipleChoiceField(
            required=False,
            label="Drop these keys",
            choices=[(key, key) for key in droppable],
            widget=forms.CheckboxSelectMultiple,
            help_text="each ticked key leaves the frame and reads its default (shown under its field)",
        )
    form.fields[REMOVE] = forms.BooleanField(
        required=False,
        label=f"Remove the frame's stop rule (the fields above are then ignored; {ENGINE_DEFAULT} applies)",
    )


def changed_and_dropped(base: Mapping[str, Any], data: Mapping[str, Any]) -> list[str]:
    """Keys ticked to drop whose field was also changed from the frame's value: the form cannot tell
    which the person meant, so it asks (an untouched field still shows the value, and drop wins)."""
    if data.get(REMOVE):
        return []
    now = declared(base)
    return [
        key
        for key in data.get(DROP) or ()
        if data.get(field_name(key)) is not None and data[field_name(key)] != now.get(key)
    ]


def apply(frame: dict[str, Any], data: Mapping[str, Any]) -> None:
    """Set the frame's admission mapping from the fields: blank keeps a key, a ticked key is dropped,
    remove drops the mapping."""
    if data.get(REMOVE):
        frame.pop("admission", None)
        return
    admission = copy.deepcopy(declared(frame))
    if data.get(RULE):
        admission["rule"] = data[RULE]
    dropped = set(data.get(DROP) or ())
    for key in VALUE_KEYS:
        value = data.get(field_name(key))
        if key in dropped:
            admission.pop(key, None)
        elif value is not None:
            admission[key] = value
    if admission or "admission" in frame:
        frame["admission"] = admission


def issues(frame: Mapping[str, Any]) -> list[FrameIssue]:
    """What the corpus parser says of the frame's admission mapping, at paths like admission.floor
    (the same check an imported corpus.yaml frame and proposal_submit make)."""
    if "admission" not in frame:
        return []
    # a frame holding only this key: every other frame key is optional, so only its issues come back
    return frame_issues({"admission": frame["admission"]}, project="admission", declared=())


def field_for(path: tuple, raw_patch: Any) -> str | None:
    """The field an issue at `path` (under admission) belongs to; the raw patch when it set the key."""
    if isinstance(raw_patch, dict) and "admission" in raw_patch:
        return "raw_patch"
    if len(path) > 1 and path[1] in ADMISSION_KEYS:
        return field_name(path[1])
    return RULE
