"""Each selection, backtest replay and corpus import emits a span saying where context came from."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.backtest.conftest import context_lab, sift, sift_users  # noqa: F401 - shared fixtures

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans():
    """The SDK's in-memory exporter behind the global provider (set once per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _named(exporter, name):
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_an_import_and_a_selection_emit_spans_with_their_counts(spans, sift_users):  # noqa: F811
    from selection.serving.serve import select_for_user

    [imported] = _named(spans, "fg.corpus.import")
    assert imported.attributes["fg.corpus"] == "context-lab" and imported.attributes["fg.units"] > 0

    selection = select_for_user(
        user=sift_users["auditor"], project_slug="sift", query="smoke test config", budget_tokens=500
    )
    [span] = _named(spans, "fg.selection")
    a = span.attributes
    assert (a["fg.project"], a["fg.frame_version"], a["fg.condition"]) == ("sift", 1, "C6")
    assert a["fg.trace_id"] == selection.trace.pk
    assert a["fg.candidates"] == a["fg.admitted"] + a["fg.rejected"] == len(selection.result.trace.candidates)
    assert a["fg.bundle_tokens"] == selection.result.bundle.tokens <= 500
    assert a["fg.source"] == "api"


def test_a_backtest_replay_emits_a_span(spans, sift):  # noqa: F811
    from backtest import services
    from backtest.replay import services as replays
    from governance.models import Proposal

    backtest = services.backtest_enqueue(proposal=Proposal.objects.get(uid="looser-stop-rule"), requested_by=None)
    replay = replays.replay_one(backtest_id=backtest.pk, task_id=backtest.task_ids[0], side="candidate")
    [span] = _named(spans, "fg.backtest.replay")
    a = span.attributes
    assert (a["fg.project"], a["fg.side"], a["fg.trace_id"]) == ("sift", "candidate", replay.trace_id)
    assert a["fg.frame_version"] == backtest.candidate_version.number
    assert a["fg.candidates"] == a["fg.admitted"] + a["fg.rejected"] > 0
