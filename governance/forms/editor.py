"""The structured frame editor: it edits a copy of the current frame and yields the merge patch.

The form never validates the frame itself: rules.frame_patch does, in proposal_submit, and the
view puts each issue next to the field it names (ProposeForm.add_issues). The one exception is the
stop rule (admission.py): the form checks its numbers with that same corpus parser as it cleans, so
the live preview names a bad value before a submit does.
"""

from __future__ import annotations

import copy
from typing import Any

from django import forms

from rules.frame_patch import LIMIT_BOUNDS, METRICS, FrameIssue, compute_patch, merge_patch
from selection.corpus.frames import listed_classes
from selection.corpus.places import IDENTIFIER, NAME_RULE

from . import admission
from .editor_text import joined, lines, number, parse_patch, work_type_entry

BLANK_LIMIT_ROWS = 2
LINES_HELP = "one per line, in order"


class ProposeForm(forms.Form):
    """Title, rationale, each frame key, a textarea per work type, limit rows, the stop rule, a raw patch."""

    title = forms.CharField(max_length=300)
    rationale = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    purpose = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    objectives = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text=LINES_HELP
    )
    constraints = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text=LINES_HELP
    )
    scope = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, required=False)
    default_classes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "data-chips": "default"}), required=False, help_text=LINES_HELP
    )
    class_pull = forms.IntegerField(
        required=False,
        min_value=0,
        help_text="candidates guaranteed per preferred class",
        widget=forms.NumberInput(attrs={"data-stepper": "class pull", "min": 0}),
    )
    open_loop_work_types = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, help_text=LINES_HELP
    )
    new_wt_name = forms.CharField(required=False, label="New work type")
    new_wt_classes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "data-chips": "new"}),
        required=False,
        label="Its classes",
        help_text=LINES_HELP,
    )
    new_wt_description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        label="Its description",
        help_text="one or two sentences, for frame builders (optional)",
    )
    new_wt_cues = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "data-chips": "the new work type", "data-chip-kind": "cue"}),
        required=False,
        label="Its cues",
        help_text="words or phrases that signal it, one per line (optional)",
    )
    gate_primary = forms.ChoiceField(required=False, label="Primary metric")
    gate_min_improvement = forms.FloatField(
        required=False,
        label="Minimum improvement (the threshold)",
        help_text="the primary metric's mean must rise by more than this",
        widget=forms.NumberInput(attrs={"step": "any"}),
    )
    gate_require_interval = forms.BooleanField(
        required=False,
        label="Require the 95 % interval to clear the threshold",
        help_text="judge the primary gate and max_drop / max_rise on the paired-bootstrap interval",
    )
    raw_patch = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "class": "mono"}),
        required=False,
        label="Advanced: JSON Merge Patch applied after the fields above",
    )

    confirm_unknown_classes = forms.BooleanField(
        required=False,
        label="Keep classes that no unit in scope carries (I know they are new)",
    )

    def __init__(self, *args, base: dict, declared: list[str], known_classes=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.base = base
        # the classes the corpus's units carry: the editor offers them, and refuses others unless
        # the author confirms them (None: no check, as for proposals.yaml)
        self.known_classes = None if known_classes is None else frozenset(known_classes)
        scope_choices = list(dict.fromkeys([*declared, *(base.get("scope") or [])]))
        self.fields["scope"].choices = [(slug, slug) for slug in scope_choices]
        self.fields["gate_primary"].choices = [("", "(default)")] + [(m, m) for m in METRICS]
        gates = base.get("gates") or {}
        self.initial.update(
            purpose=base.get("purpose", ""),
            objectives=joined(base.get("objectives")),
            constraints=joined(base.get("constraints")),
            scope=list(base.get("scope") or []),
            default_classes=joined(base.get("default_classes")),
            class_pull=base.get("class_pull"),
            open_loop_work_types=joined(base.get("open_loop_work_types")),
            gate_primary=gates.get("primary", ""),
            gate_min_improvement=gates.get("min_improvement"),
            gate_require_interval=gates.get("require_interval") is True,
        )
        self.work_type_names = sorted(base.get("work_types") or {})
        for name in self.work_type_names:
            self.fields[f"wt__{name}"] = forms.CharField(
                widget=forms.Textarea(attrs={"rows": 4, "data-chips": name}),
                required=False,
                label=name,
                help_text=LINES_HELP,
            )
            self.fields[f"wt_remove__{name}"] = forms.BooleanField(
                required=False, label="remove this work type"
            )
            entry = base["work_types"][name]
            self.initial[f"wt__{name}"] = joined(listed_classes(entry))
            # description and cues: the corpus format 1.1 long form, offered for every work type
            self.fields[f"wt_desc__{name}"] = forms.CharField(
                widget=forms.Textarea(attrs={"rows": 2}),
                required=False,
                label=f"{name}: description",
            )
            self.fields[f"wt_cues__{name}"] = forms.CharField(
                widget=forms.Textarea(attrs={"rows": 2, "data-chips": name, "data-chip-kind": "cue"}),
                required=False,
                label=f"{name}: cues",
                help_text=LINES_HELP,
            )
            if isinstance(entry, dict):
                self.initial[f"wt_desc__{name}"] = entry.get("description", "")
                self.initial[f"wt_cues__{name}"] = joined(entry.get("cues"))
        limits = gates.get("limits") if isinstance(gates.get("limits"), list) else []
        self.limit_rows = len(limits) + BLANK_LIMIT_ROWS
        metric_choices = [("", "—")] + [(m, m) for m in METRICS]
        for row in range(self.limit_rows):
            # the table's cells have no <label>: each input names itself for screen readers
            self.fields[f"limit_{row}_metric"] = forms.ChoiceField(
                choices=metric_choices,
                required=False,
                label=f"limit {row + 1} metric",
                widget=forms.Select(attrs={"aria-label": f"limit {row + 1} metric"}),
            )
            for bound in LIMIT_BOUNDS:
                self.fields[f"limit_{row}_{bound}"] = forms.FloatField(
                    required=False,
                    label=f"limit {row + 1} {bound}",
                    widget=forms.NumberInput(attrs={"aria-label": f"limit {row + 1} {bound}", "step": "any"}),
                )
            if row < len(limits) and isinstance(limits[row], dict):
                self.initial[f"limit_{row}_metric"] = limits[row].get("metric", "")
                for bound in LIMIT_BOUNDS:
                    self.initial[f"limit_{row}_{bound}"] = limits[row].get(bound)
        self._limit_index_to_row: list[int] = []
        admission.add_fields(self, base)

    # --- rendering helpers -------------------------------------------------------------------

    def work_type_fields(self):
        return [
            (self[f"wt__{n}"], self[f"wt_remove__{n}"], self[f"wt_desc__{n}"], self[f"wt_cues__{n}"])
            for n in self.work_type_names
        ]

    def admission_values(self):
        """floor, unlisted, tier_cap, unlisted_floor: the numbers under the rule."""
        return [self[admission.field_name(k)] for k in admission.VALUE_KEYS]

    def admission_drop(self):
        """The "drop these keys" boxes, when the frame declares a key to drop."""
        return self[admission.DROP] if admission.DROP in self.fields else None

    def limit_bounds(self):
        return LIMIT_BOUNDS

    def limit_fields(self):
        return [
            (self[f"limit_{row}_metric"], [self[f"limit_{row}_{b}"] for b in LIMIT_BOUNDS])
            for row in range(self.limit_rows)
        ]

    # --- cleaning ---------------------------------------------------------------------------

    def clean_new_wt_name(self) -> str:
        name = self.cleaned_data["new_wt_name"].strip()
        if name and not IDENTIFIER.fullmatch(name):
            raise forms.ValidationError(f'work type "{name}" {NAME_RULE}')
        if name in self.work_type_names:
            raise forms.ValidationError(f'work type "{name}" exists already: edit its list above')
        return name

    def clean_raw_patch(self) -> dict | None:
        text = self.cleaned_data["raw_patch"].strip()
        if not text:
            return None
        return parse_patch(text)

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        self._refuse_unknown_classes(data)
        for key in admission.changed_and_dropped(self.base, data):
            self.add_error(
                admission.field_name(key), f"{key} is both changed and ticked to drop: clear the tick or the change"
            )
        if self.errors:
            return data
        target = self._target(data)
        # the stop rule's values are numbers only the corpus parser judges (a floor of 1.5): say so
        # on their fields now, so the live preview names them too
        for issue in admission.issues(target):
            self.add_error(admission.field_for(issue.path, None), str(issue))
        if self.errors:
            return data
        if data.get("raw_patch"):
            target = merge_patch(target, data["raw_patch"])
        self.patch = compute_patch(self.base, target)
        return data

    def _refuse_unknown_classes(self, data: dict) -> None:
        """A class no unit carries selects nothing: most often a typo ("runbok"). Refused on its
        field unless the author ticks confirm_unknown_classes."""
        if self.known_classes is None or data.get("confirm_unknown_classes"):
            return
        fields = [f"wt__{n}" for n in self.work_type_names] + ["new_wt_classes", "default_classes"]
        for name in fields:
            # a malformed name ("Decision") is the frame validator's to explain, next to this field
            unknown = [
                c for c in lines(data.get(name, "")) if c not in self.known_classes and IDENTIFIER.fullmatch(c)
            ]
            if unknown:
                self.add_error(
                    name,
                    f"no unit in scope carries {', '.join(repr(c) for c in unknown)}: fix the spelling, pick a "
                    'class from the list, or tick "Keep classes that no unit in scope carries"',
                )

    def _set(self, frame: dict, key: str, value: Any, empty: bool) -> None:
        # an empty field leaves an absent key absent, and clears a present one
        if empty and key not in frame:
            return
        if empty and key in ("purpose", "class_pull"):
            frame.pop(key, None)
        else:
            frame[key] = value

    def _target(self, data: dict) -> dict:
        frame = copy.deepcopy(self.base)
        self._set(frame, "purpose", data["purpose"], not data["purpose"])
        for key in ("objectives", "constraints", "default_classes", "open_loop_work_types"):
            values = lines(data[key])
            self._set(frame, key, values, not values)
        before = list(self.base.get("scope") or [])
        chosen = set(data["scope"])
        scope = [s for s in before if s in chosen] + [
            s for s, _ in self.fields["scope"].choices if s in chosen and s not in before
        ]
        self._set(frame, "scope", scope, not scope)
        self._set(frame, "class_pull", data["class_pull"], data["class_pull"] is None)

        work_types = copy.deepcopy(self.base.get("work_types") or {})
        for name in self.work_type_names:
            if data.get(f"wt_remove__{name}"):
                work_types.pop(name, None)
            else:
                work_types[name] = work_type_entry(
                    work_types.get(name),
                    lines(data.get(f"wt__{name}", "")),
                    (data.get(f"wt_desc__{name}") or "").strip(),
                    lines(data.get(f"wt_cues__{name}", "")),
                )
        if data["new_wt_name"]:
            work_types[data["new_wt_name"]] = work_type_entry(
                None,
                lines(data["new_wt_classes"]),
                (data.get("new_wt_description") or "").strip(),
                lines(data.get("new_wt_cues", "")),
            )
        self._set(frame, "work_types", work_types, not work_types)

        gates = copy.deepcopy(frame.get("gates")) if isinstance(frame.get("gates"), dict) else {}
        if data["gate_primary"]:
            gates["primary"] = data["gate_primary"]
        else:
            gates.pop("primary", None)
        if data["gate_min_improvement"] is not None:
            gates["min_improvement"] = number(data["gate_min_improvement"])
        else:
            gates.pop("min_improvement", None)
        if data.get("gate_require_interval"):
            gates["require_interval"] = True
        else:
            gates.pop("require_interval", None)
        base_limits = (self.base.get("gates") or {}).get("limits")
        base_limits = base_limits if isinstance(base_limits, list) else []
        limits = []
        self._limit_index_to_row = []
        for row in range(self.limit_rows):
            metric = data.get(f"limit_{row}_metric")
            if not metric:
                continue
            # keep a row's x- keys: start from the limit it was shown from
            kept = (
                base_limits[row]
                if row < len(base_limits) and isinstance(base_limits[row], dict)
                else {}
            )
            limit = {k: copy.deepcopy(v) for k, v in kept.items() if k.startswith("x-")}
            limit["metric"] = metric
            for bound in LIMIT_BOUNDS:
                if data.get(f"limit_{row}_{bound}") is not None:
                    limit[bound] = number(data[f"limit_{row}_{bound}"])
            limits.append(limit)
            self._limit_index_to_row.append(row)
        if limits or "limits" in gates:
            gates["limits"] = limits
        self._set(frame, "gates", gates, not gates)
        admission.apply(frame, data)
        return frame

    # --- issues from proposal_submit ----------------------------------------------------------

    def add_issues(self, issues: list[FrameIssue]) -> None:
        """Put each frame issue next to the field that produced it; the rest above the form."""
        for issue in issues:
            self.add_error(self._field_for(issue.path), str(issue))

    def _field_for(self, path: tuple) -> str | None:
        if not path:
            return None
        head = path[0]
        if head in self.fields:  # a frame key edited by a field of its own name (purpose, scope, ...)
            return head
        if head == "admission":
            return admission.field_for(path, self.cleaned_data.get("raw_patch"))
        if head == "work_types" and len(path) > 1:
            name = path[1]
            part = path[2] if len(path) > 2 and path[2] in ("description", "cues") else None
            if part and f"wt_{part[:4]}__{name}" in self.fields:
                return f"wt_{part[:4]}__{name}"
            if f"wt__{name}" in self.fields:
                return f"wt__{name}"
            if name == self.cleaned_data.get("new_wt_name"):
                return "new_wt_classes"
        if head == "gates" and len(path) > 1:
            if path[1] == "primary":
                return "gate_primary"
            if path[1] == "min_improvement":
                return "gate_min_improvement"
            if path[1] == "require_interval":
                return "gate_require_interval"
            if (
                path[1] == "limits"
                and len(path) > 2
                and isinstance(path[2], int)
                and path[2] < len(self._limit_index_to_row)
            ):
                row = self._limit_index_to_row[path[2]]
                if len(path) > 3 and path[3] in LIMIT_BOUNDS:
                    return f"limit_{row}_{path[3]}"
                return f"limit_{row}_metric"
        return "raw_patch" if self.cleaned_data.get("raw_patch") else None


