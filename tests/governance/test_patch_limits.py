"""Proposal patches that cannot be stored or parsed are refused with a message, writing nothing."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.forms import parse_patch
from governance.proposals import errors as proposal_errors
from selection.corpus import limits


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('{"class_pull": NaN}', "NaN is not a JSON number"),
        ('{"gates": {"min_improvement": Infinity}}', "Infinity is not a JSON number"),
        ('{"x-deep": ' + "[" * 20000 + "]" * 20000 + "}", "nests deeper than 32 levels"),
        ('{"x-deep": ' + "[" * 40 + "]" * 40 + "}", "nests deeper than 32 levels"),
        ('{"x-big": "' + "p" * 70000 + '"}', "a patch may hold at most 65536"),
        ('{"purpose": "a\\u0000b"}', "NUL character"),
        ('{"purpose": "a\\ud800b"}', "lone surrogate"),
        ('{"class_pull": ' + "9" * 5000 + "}", "not valid JSON"),
        ('{"x-n": 1e400}', "not a finite number"),
    ],
)
def test_the_propose_page_refuses_unstorable_patches_with_a_400(client, project, users, counts, text, fragment):
    from tests.governance.test_views import form_data

    before = counts()
    client.force_login(users["lead"])
    response = client.post(reverse("proposal-create", args=["alpha"]), form_data(project, raw_patch=text))
    assert response.status_code == 400
    assert fragment in response.content.decode()
    assert counts() == before


@pytest.mark.parametrize(
    "patch, fragment",
    [
        ({"class_pull": float("nan")}, "not a finite number"),
        ({"gates": {"min_improvement": float("inf")}}, "not a finite number"),
        ({"class_pull": 2**40}, "must be at most 2147483647"),
        ({"x-big": 2**60}, "out of range"),
        ({"purpose": "nul\u0000"}, "NUL character"),
        ({"x-pad": "p" * 70000}, "a patch may hold 65536"),
    ],
)
def test_the_service_refuses_them_for_every_caller(submit, counts, patch, fragment):
    before = counts()
    with pytest.raises(proposal_errors.ProposalInvalid, match=fragment):
        submit(patch)
    assert counts() == before


def test_the_propose_command_refuses_a_deep_patch_file(project, users, tmp_path, counts):
    path = tmp_path / "deep.json"
    path.write_text('{"x-d": ' + "[" * 100000 + "]" * 100000 + "}")
    before = counts()
    with pytest.raises(CommandError, match="not a JSON patch this server takes"):
        call_command("propose", "alpha", "--title", "t", "--patch", str(path), "--user", "lead", stdout=io.StringIO())
    path.write_text('{"class_pull": NaN}')
    with pytest.raises(CommandError, match="not a finite number"):
        call_command("propose", "alpha", "--title", "t", "--patch", str(path), "--user", "lead", stdout=io.StringIO())
    assert counts() == before


JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=8),
        st.sampled_from(["\u0000", "\ud800", 2**63, float("nan"), "Decision", "rule"]),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
PATCHES = st.dictionaries(
    st.sampled_from(
        [
            *limits.__dict__.get("FRAME_KEYS", ()),
            "class_pull",
            "scope",
            "gates",
            "work_types",
            "approval",
            "x-n",
            "purpose",
            "default_classes",
        ]
    ),
    JSON_VALUES,
    min_size=1,
    max_size=3,
)


@pytest.mark.django_db
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(patch=PATCHES)
def test_any_random_patch_is_stored_or_refused_with_a_message(submit, counts, patch):
    before = counts()
    try:
        proposal = submit(patch)
    except proposal_errors.ProposalInvalid as error:
        assert error.issues and all(issue.message for issue in error.issues)
        assert counts() == before
        str(error).encode("utf-8")
        return
    # what was stored reads back unchanged
    proposal.refresh_from_db()
    assert proposal.patch == json.loads(json.dumps(patch))


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=60) | st.builds(lambda v: json.dumps(v), JSON_VALUES))
def test_any_typed_patch_text_parses_or_is_a_form_error(text):
    from django import forms

    try:
        value = parse_patch(text)
    except forms.ValidationError as error:
        assert error.messages
        return
    assert isinstance(value, dict)
