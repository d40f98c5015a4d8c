"""rules.frame_patch: merge patch semantics, validation naming the field, patch, diff."""

from __future__ import annotations

import copy

from rules import frame_diff
from rules import frame_patch as frames

from .conftest import FRAME

DECLARED = ["alpha", "beta"]


def issues_for(patch):
    frame, issues = frames.apply_patch(FRAME, patch)
    return issues or frames.frame_issues(frame, project="alpha", declared=DECLARED)


def test_null_deletes_a_key_and_lists_are_replaced_whole():
    frame, issues = frames.apply_patch(
        FRAME,
        {
            "class_pull": None,
            "work_types": {"implementation-review": ["result"], "publication-review": None},
        },
    )
    assert issues == []
    assert "class_pull" not in frame
    assert frame["work_types"] == {"implementation-review": ["result"]}
    assert frame["gates"] == FRAME["gates"] and frame["x-note"] == FRAME["x-note"]


def test_patch_does_not_mutate_the_base():
    base = copy.deepcopy(FRAME)
    frames.apply_patch(base, {"gates": {"limits": []}, "scope": ["beta"]})
    assert base == FRAME


def test_a_patch_that_is_not_a_mapping_is_refused():
    assert [str(i) for i in issues_for(["scope"])] == [
        "patch: a patch is a JSON Merge Patch: a mapping of frame keys"
    ]


def test_an_invalid_class_names_its_place_in_the_frame():
    issues = issues_for({"work_types": {"implementation-review": ["decision", "rule", "Decision"]}})
    assert [i.where for i in issues] == ["work_types.implementation-review[2]"]
    assert '"Decision"' in issues[0].message


def test_unknown_keys_and_bad_values_are_each_named():
    issues = issues_for(
        {
            "colour": "blue",
            "x-colour": "kept",
            "class_pull": -1,
            "scope": ["gamma"],
            "gates": {"primary": "recall", "limits": [{"metric": "precision"}]},
        }
    )
    where = {i.where for i in issues}
    assert where == {"colour", "class_pull", "scope[0]", "gates.primary", "gates.limits[0].metric"}
    assert any('unknown key "colour"' in i.message for i in issues)


def test_a_class_listed_twice_is_an_error():
    issues = issues_for({"work_types": {"publication-review": ["rule", "result", "rule"]}})
    assert [str(i) for i in issues] == [
        'work_types.publication-review[2]: "rule" is listed twice (first at [0])'
    ]


def test_warning_for_classes_no_unit_in_scope_carries():
    frame, _ = frames.apply_patch(
        FRAME, {"work_types": {"implementation-review": ["decision", "measurement-contract"]}}
    )
    warnings = frames.unknown_class_warnings(
        frame, carried={"decision", "rule", "chapter-prose"}, scope=["alpha"]
    )
    assert warnings == [
        "work_types.implementation-review[1]: no unit in scope (alpha) carries the class "
        '"measurement-contract"'
    ]


def test_compute_patch_is_minimal_and_round_trips():
    target = copy.deepcopy(FRAME)
    target["work_types"]["implementation-review"] = ["rule", "decision"]
    del target["work_types"]["publication-review"]
    del target["class_pull"]
    target["gates"]["min_improvement"] = 0.01
    patch = frames.compute_patch(FRAME, target)
    assert patch == {
        "class_pull": None,
        "gates": {"min_improvement": 0.01},
        "work_types": {"implementation-review": ["rule", "decision"], "publication-review": None},
    }
    assert frames.apply_patch(FRAME, patch)[0] == target
    assert frames.compute_patch(FRAME, copy.deepcopy(FRAME)) == {}


def test_diff_marks_added_removed_and_moved_items():
    left, right = frame_diff.diff_lists(
        ["decision", "rule", "result"], ["rule", "decision", "convention"]
    )
    assert [(m.text, m.mark) for m in left] == [
        ("decision", "kept"),
        ("rule", "moved"),
        ("result", "removed"),
    ]
    assert [(m.text, m.mark) for m in right] == [
        ("rule", "moved"),
        ("decision", "kept"),
        ("convention", "added"),
    ]


def test_diff_frames_is_field_by_field_with_a_row_per_work_type():
    frame, _ = frames.apply_patch(FRAME, {"work_types": {"triage": ["rule"]}, "class_pull": 5})
    rows = {r.path: r for r in frame_diff.diff_frames(FRAME, frame)}
    assert rows["work_types.triage"].status == "added"
    assert rows["work_types.implementation-review"].status == "same"
    assert rows["class_pull"].status == "changed"
    assert rows["gates.limits"].status == "same"
    assert rows["x-note"].status == "same"


def test_diff_frames_gives_the_stop_rule_a_row_per_key():
    before = {**FRAME, "admission": {"rule": "relative", "floor": 0.6, "unlisted": 2}}
    after, _ = frames.apply_patch(before, {"admission": {"floor": 0.4, "tier_cap": 7}})
    rows = {
        r.path: (r.status, [m.text for m in r.left], [m.text for m in r.right])
        for r in frame_diff.diff_frames(before, after)
    }
    assert rows["admission.floor"] == ("changed", ["0.6"], ["0.4"])
    assert rows["admission.tier_cap"] == ("added", [], ["7"])
    assert rows["admission.rule"][0] == rows["admission.unlisted"][0] == "same"
    removed, _ = frames.apply_patch(before, {"admission": None})
    assert {r.path: r.status for r in frame_diff.diff_frames(before, removed) if r.path.startswith("admission")} == {
        "admission.rule": "removed", "admission.floor": "removed", "admission.unlisted": "removed",
    }
