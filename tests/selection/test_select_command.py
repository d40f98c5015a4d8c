"""The `select` command is one more interface onto serve.select_in_project: it parses and renders,
builds no work frame, runs no engine and checks nothing itself; its bundle is the API's."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from selection.management.commands import select as select_command
from tests.api.conftest import api, people, token_for  # noqa: F401 - fixtures shared with the API tests
from tests.backtest.conftest import (  # noqa: F401 - fixtures shared with the backtest tests
    celery_worker_process,
    context_lab,
    sift,
    sift_users,
)

COMMAND = Path(select_command.__file__)
# what the command may take from selection: its parse targets, the service, the errors it maps to
# exit statuses, and what it renders with
ALLOWED = {
    "selection.models": {"Project"},
    "selection.serving": {"server_client"},  # the running server serves it when one answers
    "selection.serving.serve": {"StrictRoutingRefused", "select_in_project"},
    "selection.serving.selections": {"SelectionError"},
    # MemoryCustodian's output (--format mc-json|mc-text) and its --rule/--profile/--area words
    "selection.serving.custodian_format": {"EXPLICIT_KINDS", "FORMATS", "custodian_output", "custodian_overlays"},
    "selection.engine.policy": {"UnknownWorkType"},
    "selection.engine.reason_codes": {"Disposition"},
    "selection.engine.routing.report": {"routing_summary"},
    "selection.engine.routing.types": {"RoutingInputs"},
    "selection.engine.types": {"WorkSignal"},
}
# the checks select_in_project makes: the command must not repeat them
SERVICE_CHECKS = {"get_condition", "UnknownCondition", "SIGNAL_KINDS", "ORACLE", "strict_refusal", "WorkFrame"}


def _tree() -> ast.Module:
    return ast.parse(COMMAND.read_text())


def test_the_command_imports_only_the_service_and_what_it_renders():
    taken: dict[str, set[str]] = {}
    for node in ast.walk(_tree()):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "selection":
            taken.setdefault(node.module, set()).update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            assert not [a.name for a in node.names if a.name.split(".")[0] == "selection"], "import selection.*"
    outside = {module: names - ALLOWED.get(module, set()) for module, names in taken.items()}
    assert not {module: names for module, names in outside.items() if names}, outside


def test_the_command_builds_no_work_frame_and_repeats_no_check():
    tree = _tree()
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not names & SERVICE_CHECKS, names & SERVICE_CHECKS
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert "CO" not in strings, "the command tells the oracle apart itself"
    calls = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "select_in_project"
    ]
    assert len(calls) == 1, "the command selects through select_in_project, once"


def test_the_command_refuses_what_the_service_refuses(context_lab):  # noqa: F811
    with pytest.raises(CommandError, match="the oracle CO reads a task's hidden ledger"):
        call_command("select", project="sift", query="anything", condition="CO", stdout=io.StringIO())
    with pytest.raises(CommandError, match="unknown condition|C9"):
        call_command("select", project="sift", query="anything", condition="C9", stdout=io.StringIO())


def test_the_command_and_the_api_give_the_same_bundle(api, people, token_for, tmp_path):  # noqa: F811
    lead = people["lead"]
    signal = {"id": "s1", "kind": "failing_test", "content": "test_tokenizer_handles_unicode fails with IndexError"}
    request = {"project": "sift", "signals": [signal], "query": "tokenizer unicode IndexError", "budget_tokens": 600}
    answer = api(token_for(lead, "sift", "lead")).post("/select", request)
    assert answer.status_code == 200, answer.content
    served = answer.json()

    signals = tmp_path / "signals.json"
    signals.write_text(json.dumps([signal]))
    out = io.StringIO()
    call_command(
        "select", "--project", "sift", "--query", request["query"], "--signals", str(signals),
        "--budget", "600", "--user", lead.username, "--json", stdout=out,
    )
    printed = json.loads(out.getvalue())

    assert printed["trace_id"] != served["trace_id"]  # two requests, two traces
    bundle = printed["bundle"]
    assert bundle["digest"] == served["bundle"]["digest"]
    assert bundle["rendered"] == served["bundle"]["rendered"]
    for key in ("tokens", "budget_tokens"):
        assert bundle[key] == served["bundle"][key]
    assert [item["sources"] for item in bundle["items"]] == [item["sources"] for item in served["bundle"]["items"]]
    assert printed["trace"]["effective_condition"] == served["diagnostics"]["effective_condition"]
