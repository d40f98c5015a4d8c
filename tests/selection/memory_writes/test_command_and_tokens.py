"""The memory command and the agent token: the same services from a shell, and a scope that does
nothing but select, write memory and report outcomes in one project."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.selection.memory_writes.conftest import counts


def _memory(*args) -> dict:
    out = StringIO()
    call_command("memory", *args, stdout=out)
    return json.loads(out.getvalue())


def test_the_command_creates_supersedes_closes_and_shows(sift, people):
    from selection.models import MemoryChange, MemoryUnit

    created = _memory("create", "sift", "--as", "lead", "--class", "design_note", "--text", "Judged set refresh.",
                      "--idempotency-key", "cli-1")  # fmt: skip
    assert created["status"] == "active"
    again = _memory("create", "sift", "--as", "lead", "--class", "design_note", "--text", "Judged set refresh.",
                    "--idempotency-key", "cli-1")  # fmt: skip
    assert again == created and MemoryUnit.objects.filter(text="Judged set refresh.").count() == 1
    successor = _memory("supersede", "sift", created["unit"], "--as", "lead", "--class", "design_note",
                        "--text", "Refresh the judged set monthly.")  # fmt: skip
    assert successor["closed"] == [created["unit"]]
    loop = MemoryUnit.objects.filter(project=sift, open_loop_status="open").order_by("uid").first()
    assert _memory("close-loop", "sift", loop.uid, "--as", "lead")["open_loop"]["status"] == "closed"
    shown = _memory("show", "sift", created["unit"], "--as", "auditor")
    assert shown["superseded_by"] == [successor["unit"]]
    assert MemoryChange.objects.filter(via="command").count() == 4  # created, created + changed, changed


def test_the_command_refuses_in_words_and_writes_nothing(sift, people):
    before = counts()
    with pytest.raises(CommandError, match="may not write memory"):
        _memory("create", "sift", "--as", "auditor", "--class", "design_note", "--text", "x")
    with pytest.raises(CommandError, match="class"):
        _memory("create", "sift", "--as", "lead", "--class", "runbok", "--text", "x")
    assert counts() == before


def test_api_token_issues_an_agent_token_to_a_lead_or_reviewer_only(sift, people):
    from governance.tokens import services as tokens

    out = StringIO()
    call_command("api_token", "reviewer", "--project", "sift", "--role", "agent", stdout=out)
    user = tokens.token_user(out.getvalue().strip())
    assert user.token_scope.role == "agent"
    with pytest.raises(CommandError, match="may not issue an agent token"):
        call_command("api_token", "auditor", "--project", "sift", "--role", "agent", stdout=StringIO())


def test_an_agent_token_does_only_its_three_things(sift, people, agent):
    from authority import access

    caps = access.capabilities(agent, sift)
    assert caps.can_read and caps.can_write_memory and caps.agent
    assert not (caps.can_propose or caps.can_promote or caps.can_review or caps.can_comment or caps.can_replay)
    assert not caps.can_admit_memory
    access.access_report_outcome(agent, sift)
    for check, action in ((access.access_propose, "propose a frame change"), (access.access_erase, "erase unit text"),
                          (access.access_admit_memory, "admit or decline memory"),
                          (access.access_label, "label traces")):  # fmt: skip
        with pytest.raises(access.AccessDenied, match=action):
            check(agent, sift)


def test_an_agent_token_stops_when_its_owner_loses_the_role(sift, people, agent_token):
    from authority.models import RoleGrant
    from governance.tokens import services as tokens
    from selection.memory.writes.services import unit_create

    RoleGrant.objects.filter(user=people["reviewer"], project=sift).delete()
    user = tokens.token_user(agent_token)
    with pytest.raises(Exception, match="may not write memory"):
        unit_create(actor=user, project=sift, fields={"class": "design_note", "text": "x"}, via="api")


def test_the_tokens_page_offers_an_agent_scope(client, sift, people):
    from django.urls import reverse

    from governance.models import ApiToken

    client.force_login(people["reviewer"])
    assert "Agent (select, write memory, report outcomes) in sift" in client.get(reverse("api-tokens")).content.decode()
    response = client.post(reverse("api-token-create"), {"name": "bot", "scope": f"{sift.pk}:agent", "days": 30})
    assert response.status_code == 200
    assert ApiToken.objects.get(name="bot").role == "agent"
