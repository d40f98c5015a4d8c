"""Work types that describe themselves (corpus format 1.1 long form) in the frame page, the
structured editor, proposals (merge patches) and the diff of versions."""

from __future__ import annotations

from django.urls import reverse

from authority.models import FrameVersion
from governance.models import Proposal

from .test_views import form_data, login


def test_the_editor_writes_description_and_cues_as_the_long_form(client, project, users):
    data = form_data(
        project,
        **{
            "wt_desc__publication-review": "Judging whether prose is ready to publish.",
            "wt_cues__publication-review": "prose\nchapter",
            "new_wt_name": "triage",
            "new_wt_classes": "rule",
            "new_wt_description": "Sorting incoming reports.",
        },
    )
    login(client, users["lead"]).post(reverse("proposal-create", args=["alpha"]), data)
    assert Proposal.objects.get().patch == {
        "work_types": {
            "publication-review": {
                "classes": ["chapter-prose"],
                "description": "Judging whether prose is ready to publish.",
                "cues": ["prose", "chapter"],
            },
            "triage": {"classes": ["rule"], "description": "Sorting incoming reports."},
        }
    }


def test_a_long_form_work_type_is_patched_field_by_field_and_shown(client, project, users, submit):
    submit(
        {
            "work_types": {
                "implementation-review": {
                    "classes": ["decision", "rule", "result"],
                    "description": "Reviewing code being changed.",
                    "cues": ["code", "patch"],
                }
            }
        }
    )
    version = FrameVersion.objects.get(project=project, number=2)
    # the editor, opened on v2, changes only the class order: the patch touches `classes` alone
    from governance.forms import ProposeForm

    shown = ProposeForm(base=version.snapshot, declared=["alpha", "beta"])
    form = {n: v for n, v in shown.initial.items() if v is not None and v is not False}
    form.update({"title": "Rules first", "wt__implementation-review": "rule\ndecision\nresult"})
    editor = ProposeForm(form, base=version.snapshot, declared=["alpha", "beta"])
    assert editor.is_valid(), editor.errors
    assert editor.patch == {"work_types": {"implementation-review": {"classes": ["rule", "decision", "result"]}}}

    diff = login(client, users["auditor"]).get(reverse("frame-diff", args=["alpha"]) + "?a=1&b=2")
    html = diff.content.decode()
    assert "<code>work_types.implementation-review.classes</code>" in html
    description = html.split("<code>work_types.implementation-review.description</code>")[1].split("</tr>")[0]
    assert "Reviewing code being changed." in description and "added" in description


def test_project_page_shows_descriptions_and_cues(client, project, users, submit):
    from authority.models import Promotion

    proposal = submit(
        {
            "work_types": {
                "publication-review": {
                    "classes": ["chapter-prose"],
                    "cues": ["prose"],
                    "description": "Ready to publish?",
                }
            }
        }
    )
    Promotion.objects.create(project=project, frame_version=proposal.frame_version, sequence=2)
    html = login(client, users["auditor"]).get(reverse("project-detail", args=["alpha"])).content.decode()
    row = html.split('id="wt-publication-review"')[1].split("</tr>")[0]
    assert "Ready to publish?" in row and '<span class="chip cue">prose</span>' in row
    assert '<span class="rank">1</span> chapter-prose' in row


def test_frame_checks_read_the_long_form():
    from rules import frame_patch as frames

    from .conftest import FRAME

    long_form = {
        "work_types": {
            "implementation-review": {"classes": ["decision", "rule", "decision"], "cues": ["code"]},
            "triage": {"classes": ["measurement-contract"], "description": "Sorting reports."},
        }
    }
    frame, _ = frames.apply_patch(FRAME, long_form)
    issues = frames.frame_issues(frame, project="alpha", declared=["alpha", "beta"])
    assert [str(i) for i in issues] == [
        'work_types.implementation-review.classes[2]: "decision" is listed twice (first at [0])'
    ]
    warnings = frames.unknown_class_warnings(frame, carried={"decision", "rule"}, scope=["alpha"])
    assert 'work_types.triage.classes[0]: no unit in scope (alpha) carries the class "measurement-contract"' in warnings
    missing = frames.apply_patch(FRAME, {"work_types": {"triage": {"description": "No classes."}}})[0]
    assert [str(i) for i in frames.frame_issues(missing, project="alpha", declared=["alpha"])] == [
        'work_types.triage.classes: required key "classes" is missing'
    ]
