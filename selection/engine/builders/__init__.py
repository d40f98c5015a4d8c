"""Frame builders: pure functions from WorkSignals to a WorkFrame with its establishment, chosen by
a registry that rejects unknown names."""

from __future__ import annotations

from collections.abc import Callable

from ..types import WorkFrame
from .common import (
    BuilderInput,
    BuilderTools,
    Exemplar,
    UnknownBuilder,
    establish,
    establishment_of,
)
from .cue import build_cue
from .declared import build_declared
from .model import answer_schema, build_model, model_request
from .similarity import build_similarity

Builder = Callable[[BuilderInput, BuilderTools], WorkFrame]

BUILDERS: dict[str, Builder] = {
    "declared": build_declared,
    "cue": build_cue,
    "similarity": build_similarity,
    "model": build_model,
}


def get_builder(name: str) -> Builder:
    try:
        return BUILDERS[name]
    except KeyError:
        raise UnknownBuilder(
            f"unknown frame builder {name!r}; known: {', '.join(BUILDERS)}"
        ) from None


def build_work_frame(name: str, inputs: BuilderInput, tools: BuilderTools | None = None) -> WorkFrame:
    """The WorkFrame the named builder establishes from `inputs`."""
    return get_builder(name)(inputs, tools or BuilderTools())


__all__ = [
    "BUILDERS",
    "BuilderInput",
    "BuilderTools",
    "Exemplar",
    "UnknownBuilder",
    "answer_schema",
    "build_work_frame",
    "establish",
    "establishment_of",
    "get_builder",
    "model_request",
]
