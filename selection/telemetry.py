"""OpenTelemetry spans for each selection, backtest replay and corpus import; opt-in export.

Spans are always made through the OpenTelemetry API (a no-op until a tracer provider exists).
`configure_from_env()` installs the SDK's provider when OTEL_TRACES_EXPORTER names an exporter
("console", or "otlp" when opentelemetry-exporter-otlp is installed), so a team's tracing shows
which project, frame version and condition each bundle came from and what it admitted.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import os

from opentelemetry import trace

logger = logging.getLogger(__name__)

TRACER_NAME = "frame_governance"
ATTR = "fg."  # every attribute this module sets starts with it


def _tracer():
    return trace.get_tracer(TRACER_NAME)


def selection_attributes(*, project: str, frame_version: int, result, trace_id: int | None) -> dict:
    """What a span says of one selection: where its context came from and what it admitted."""
    candidates = result.trace.candidates
    admitted = len(result.trace.admitted_unit_ids())
    attributes = {
        f"{ATTR}project": project,
        f"{ATTR}frame_version": frame_version,
        f"{ATTR}condition": result.trace.condition,
        f"{ATTR}effective_condition": result.trace.effective_condition,
        f"{ATTR}candidates": len(candidates),
        f"{ATTR}admitted": admitted,
        f"{ATTR}rejected": len(candidates) - admitted,
        f"{ATTR}bundle_tokens": result.bundle.tokens,
        f"{ATTR}budget_tokens": result.bundle.budget_tokens,
        f"{ATTR}bundle_digest": result.bundle.digest,
    }
    if trace_id is not None:
        attributes[f"{ATTR}trace_id"] = trace_id
    return attributes


def traced_selection(run):
    """Wrap selections.run_selection: one `fg.selection` span per call, its attributes from the result."""

    @functools.wraps(run)
    def wrapper(*args, **kwargs):
        project = kwargs.get("project")
        with _tracer().start_as_current_span("fg.selection") as span:
            selection = run(*args, **kwargs)
            if span.is_recording():
                span.set_attributes(
                    {
                        f"{ATTR}source": kwargs.get("source", ""),
                        **selection_attributes(
                            project=getattr(project, "slug", ""),
                            frame_version=selection.trace.frame_version if selection.trace else 0,
                            result=selection.result,
                            trace_id=selection.trace.pk if selection.trace else None,
                        ),
                    }
                )
            return selection

    return wrapper


def traced_replay(replay):
    """Wrap backtest.services.replay_one: one `fg.backtest.replay` span per task and side."""

    @functools.wraps(replay)
    def wrapper(*, backtest_id: int, task_id: int, side: str):
        with _tracer().start_as_current_span("fg.backtest.replay") as span:
            span.set_attributes({f"{ATTR}backtest": backtest_id, f"{ATTR}task": task_id, f"{ATTR}side": side})
            row = replay(backtest_id=backtest_id, task_id=task_id, side=side)
            stored = getattr(row, "trace", None)  # an ablation variant stores metrics, no trace
            if span.is_recording() and stored is not None:
                admitted = len(stored.admitted)
                candidates = stored.candidates.count()
                span.set_attributes(
                    {
                        f"{ATTR}project": stored.project.slug,
                        f"{ATTR}frame_version": stored.frame_version,
                        f"{ATTR}condition": stored.condition,
                        f"{ATTR}candidates": candidates,
                        f"{ATTR}admitted": admitted,
                        f"{ATTR}rejected": candidates - admitted,
                        f"{ATTR}bundle_tokens": stored.bundle_tokens,
                        f"{ATTR}trace_id": stored.pk,
                    }
                )
            return row

    return wrapper


def traced_replays(replay_many):
    """Wrap backtest.services.replay_many: one `fg.backtest.replays` span per chunk of pairs."""

    @functools.wraps(replay_many)
    def wrapper(*, backtest_id: int, pairs, **kwargs):
        with _tracer().start_as_current_span("fg.backtest.replays") as span:
            span.set_attributes({f"{ATTR}backtest": backtest_id, f"{ATTR}pairs": len(pairs)})
            return replay_many(backtest_id=backtest_id, pairs=pairs, **kwargs)

    return wrapper


def traced_import(corpus_import):
    """Wrap importing.corpus_import: one `fg.corpus.import` span with the corpus and its counts."""

    @functools.wraps(corpus_import)
    def wrapper(path, **kwargs):
        with _tracer().start_as_current_span("fg.corpus.import") as span:
            corpus = corpus_import(path, **kwargs)
            if span.is_recording():
                span.set_attributes(
                    {
                        f"{ATTR}corpus": corpus.name,
                        f"{ATTR}projects": corpus.projects.count(),
                        f"{ATTR}units": corpus.units.count(),
                        f"{ATTR}tasks": corpus.tasks.count(),
                    }
                )
            return corpus

    return wrapper


def configure_from_env() -> bool:
    """Install the SDK's tracer provider when OTEL_TRACES_EXPORTER asks for an exporter."""
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    names = [n for n in names if n != "none"]
    if not names:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": "frame-governance"}))
    for name in names:
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            if importlib.util.find_spec("opentelemetry.exporter.otlp") is None:
                logger.warning("OTEL_TRACES_EXPORTER=otlp needs the opentelemetry-exporter-otlp package")
                continue
            exporter = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
            provider.add_span_processor(BatchSpanProcessor(exporter.OTLPSpanExporter()))
        else:
            logger.warning("OTEL_TRACES_EXPORTER: unknown exporter %r (console or otlp)", name)
    trace.set_tracer_provider(provider)
    return True
