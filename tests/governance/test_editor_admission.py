"""The editor's stop-rule fields: a proposal made through them equals the raw-patch one (patch, diff,
frame); a bad value is refused on its field by the corpus parser's own words and stores nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from django.urls import reverse

from authority.selectors import current_frame_version
from governance.forms import ProposeForm
from governance.models import Proposal
from rules.frame_patch import frame_classes

from .test_views import shown as posted_untouched

pytestmark = pytest.mark.django_db

CONTEXT_LAB = Path(__file__).resolve().parents[2] / "fixtures" / "context-lab"


def _fixture(name: str, key: str, value: str) -> dict:
    items = yaml.safe_load((CONTEXT_LAB / name).read_text())[key]
    return next(item for item in items if item.get("slug", item.get("id")) == value)


LOOSER = _fixture("proposals.yaml", "proposals", "looser-stop-rule")["patch"]


@pytest.fixture
def sift(make_project, django_user_model, grant):
    """Sift's frame as fixtures/context-lab declares it (admission and all), with a unit per class it
    names, and its lead."""
    from selection.models import MemoryUnit

    frame = _fixture("corpus.yaml", "projects", "sift")["frame"]
    project = make_project("sift", corpus="context-lab", frame=frame)
    for i, cls in enumerate(sorted({cls for _, cls in frame_classes(frame)})):
        MemoryUnit.objects.create(
            corpus=project.corpus, project=project, uid=f"s{i}", evidence_class=cls, text="x" * 8, tokens=2
        )
    grant(django_user_model.objects.create_user("lead"), project, "lead")
    return project


def shown(project) -> dict:
    """What the propose page posts for `project` when nobody edits a field."""
    return posted_untouched(project, declared=[project.slug])


def edited(project, **changes) -> dict:
    return {**shown(project), "title": "Loosen the stop rule", "rationale": "a required protocol is stopped", **changes}


def design_review_without_notes(project) -> dict:
    classes = shown(project)["wt__design-review"].splitlines()
    return {"wt__design-review": "\n".join(c for c in classes if c != "design_note")}


def form_patch(project, data) -> dict:
    base = current_frame_version(project=project)
    form = ProposeForm(data, base=base.snapshot, declared=[project.slug])
    assert form.is_valid(), form.errors
    return form.patch


def test_the_fields_show_the_frame_s_stop_rule(client, sift):
    client.force_login(_lead(sift))
    html = client.get(reverse("proposal-create", args=["sift"])).content.decode()
    block = html[html.index('id="stop-rule"') : html.index("</fieldset>", html.index('id="stop-rule"'))]
    assert re.search(r'<option value="relative" selected>', block)
    for key, value in (("floor", "0.6"), ("unlisted", "2"), ("tier_cap", "5"), ("unlisted_floor", "0.75")):
        assert re.search(rf'name="admission_{key}" value="{re.escape(value)}"', block), key
        assert f'<label for="id_admission_{key}">{key}</label>' in block
    assert "now relative" in block and 'id="id_admission_remove"' in block
    # nothing edited, nothing changed
    assert form_patch(sift, edited(sift)) == {}


def _lead(project):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="lead")


def test_a_proposal_through_the_fields_equals_the_raw_patch_one(client, sift):
    client.force_login(_lead(sift))
    url = reverse("proposal-create", args=["sift"])
    through_fields = edited(
        sift, admission_floor="0.4", admission_tier_cap="7", **design_review_without_notes(sift)
    )
    response = client.post(url, through_fields)
    assert response.status_code == 302, response.content.decode()[:2000]
    fields_proposal = Proposal.objects.get()
    assert fields_proposal.patch == LOOSER  # the fixture's own patch, key for key

    response = client.post(url, edited(sift, title="Raw", raw_patch=json.dumps(LOOSER)))
    assert response.status_code == 302
    raw_proposal = Proposal.objects.exclude(pk=fields_proposal.pk).get()
    assert raw_proposal.patch == fields_proposal.patch
    assert raw_proposal.frame_version.snapshot == fields_proposal.frame_version.snapshot
    assert fields_proposal.frame_version.snapshot["admission"] == {
        "rule": "relative", "floor": 0.4, "unlisted": 2, "tier_cap": 7, "unlisted_floor": 0.75,
    }
    diffs = [
        client.get(reverse("proposal-detail", args=[p.pk])).context["diff"] for p in (fields_proposal, raw_proposal)
    ]
    assert diffs[0] == diffs[1]
    assert [row.path for row in diffs[0] if row.changed] == [
        "work_types.design-review.classes", "admission.floor", "admission.tier_cap",
    ]


@pytest.mark.parametrize(
    ("changes", "patch"),
    [
        ({"admission_rule": "none"}, {"admission": {"rule": "none"}}),
        ({"admission_remove": "on", "admission_floor": "0.3"}, {"admission": None}),
        # a blank field leaves its key as it is: only tier_cap changes
        ({"admission_floor": "", "admission_unlisted": "", "admission_tier_cap": "7"}, {"admission": {"tier_cap": 7}}),
        ({"admission_rule": "", "admission_unlisted_floor": "0.5"}, {"admission": {"unlisted_floor": 0.5}}),
        # a ticked key leaves the frame (null in the patch), whatever its untouched field shows
        ({"admission_drop": ["tier_cap", "unlisted"]}, {"admission": {"tier_cap": None, "unlisted": None}}),
        ({"admission_drop": ["floor"], "admission_remove": "on"}, {"admission": None}),
        # a number as typed, as a raw patch's JSON would read it
        ({"admission_tier_cap": " 07 ", "admission_floor": "1"}, {"admission": {"tier_cap": 7, "floor": 1}}),
    ],
)
def test_rule_none_remove_and_blank_fields(sift, changes, patch):
    assert form_patch(sift, edited(sift, **changes)) == patch


def test_a_dropped_key_leaves_the_new_frame_and_its_diff_says_so(client, sift):
    client.force_login(_lead(sift))
    html = client.get(reverse("proposal-create", args=["sift"])).content.decode()
    block = html[html.index('id="field-admission_drop"') :]
    block = block[: block.index('class="help"')]
    boxes = re.findall(r'name="admission_drop" value="(\w+)"', block)
    assert boxes == ["floor", "unlisted", "tier_cap", "unlisted_floor"]
    response = client.post(reverse("proposal-create", args=["sift"]), edited(sift, admission_drop=["tier_cap"]))
    assert response.status_code == 302, response.content.decode()[:2000]
    proposal = Proposal.objects.get()
    assert proposal.frame_version.snapshot["admission"] == {
        "rule": "relative", "floor": 0.6, "unlisted": 2, "unlisted_floor": 0.75,
    }
    diff = client.get(reverse("proposal-detail", args=[proposal.pk])).context["diff"]
    assert [row.path for row in diff if row.changed] == ["admission.tier_cap"]


def test_a_key_both_changed_and_dropped_is_refused_on_its_field(client, sift):
    client.force_login(_lead(sift))
    data = edited(sift, admission_drop=["tier_cap"], admission_tier_cap="9")
    response = client.post(reverse("proposal-create", args=["sift"]), data)
    html = response.content.decode()
    assert response.status_code == 400 and not Proposal.objects.exists()
    block = html[html.index('id="field-admission_tier_cap"') :]
    assert "tier_cap is both changed and ticked to drop" in block[: block.index("</div>")]


def test_a_frame_without_a_stop_rule_has_nothing_to_drop(client, project, django_user_model, grant):
    client.force_login(grant(django_user_model.objects.create_user("lead"), project, "lead"))
    html = client.get(reverse("proposal-create", args=[project.slug])).content.decode()
    assert 'id="stop-rule"' in html and "admission_drop" not in html


def test_a_frame_without_a_stop_rule_gets_one_only_when_a_field_is_set(project):
    assert "admission" not in current_frame_version(project=project).snapshot
    assert form_patch(project, edited(project)) == {}
    data = edited(project, admission_rule="relative", admission_tier_cap="5")
    assert form_patch(project, data) == {"admission": {"rule": "relative", "tier_cap": 5}}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("floor", "1.5", "admission.floor: must be between 0 and 1, got 1.5"),
        ("unlisted", "-1", "admission.unlisted: must be at least 0, got -1"),
        ("tier_cap", "2.5", "admission.tier_cap: expected an integer"),
        ("tier_cap", "0", "admission.tier_cap: must be at least 1, got 0"),
        ("unlisted_floor", "lots", "admission.unlisted_floor: expected a number such as 0.6, got"),
        ("floor", "nan", "admission.floor: nan is not a finite number: give an ordinary number such as 0.6"),
        ("floor", "1e400", "admission.floor: inf is not a finite number: give an ordinary number such as 0.6"),
        ("rule", "strict", "admission_rule"),  # not a choice: the form refuses it before the parser
    ],
)
def test_a_bad_value_is_refused_on_its_field_and_stores_nothing(client, sift, field, value, message):
    client.force_login(_lead(sift))
    response = client.post(reverse("proposal-create", args=["sift"]), edited(sift, **{f"admission_{field}": value}))
    html = response.content.decode()
    assert response.status_code == 400 and not Proposal.objects.exists()
    block = html[html.index(f'id="field-admission_{field}"') :]
    block = block[: block.index("</div>")]
    if field == "rule":
        assert "Select a valid choice" in block
    else:
        assert 'class="error field-error"' in block and message in block
        summary = html[html.index('id="error-summary"') :]
        assert f'href="#id_admission_{field}"' in summary[: summary.index("</section>")]
        # the live preview names it too, before any submit
        preview = client.post(reverse("proposal-preview", args=["sift"]), edited(sift, **{f"admission_{field}": value}))
        assert message in preview.content.decode() and not Proposal.objects.exists()


def test_a_bad_stop_rule_in_the_raw_patch_is_shown_on_the_raw_patch(client, sift):
    client.force_login(_lead(sift))
    data = edited(sift, raw_patch=json.dumps({"admission": {"floor": 2.5}}))
    html = client.post(reverse("proposal-create", args=["sift"]), data).content.decode()
    block = html[html.index('id="field-raw_patch"') :]
    assert "admission.floor: must be between 0 and 1, got 2.5" in block[: block.index("</div>")]
    assert not Proposal.objects.exists()
