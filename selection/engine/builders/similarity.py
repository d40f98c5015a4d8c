"""The similarity builder: the loaded embedding model compares the signals with each work type's
description and with past tasks whose work type a person declared (nearest neighbour, never the
task being judged). Needs no cues."""

from __future__ import annotations

import numpy as np

from .common import (
    BuilderInput,
    BuilderTools,
    establish,
    inferred_frame,
    ordered,
    signals_text,
    unknown_frame,
)


def build_similarity(inputs: BuilderInput, tools: BuilderTools):
    if tools.embed is None:
        raise ValueError("the similarity builder needs an embedding function")
    frame = inputs.project_frame
    signals = ordered(inputs.signals)
    if not signals:
        return unknown_frame(inputs, "similarity")
    described = [
        (name, frame.profile(name).description)
        for name in frame.work_type_names
        if frame.profile(name).description
    ]
    texts = [signals_text(signals)] + [s.content for s in signals] + [d for _, d in described]
    vectors = np.asarray(tools.embed(texts), dtype=np.float64)
    whole, each = vectors[0], vectors[1 : 1 + len(signals)]
    references: dict[str, list[np.ndarray]] = {}
    for (name, _), vector in zip(described, vectors[1 + len(signals) :], strict=True):
        references.setdefault(name, []).append(vector)
    for exemplar in sorted(inputs.exemplars, key=lambda e: e.task_id):
        if exemplar.task_id == inputs.task_id or not frame.lists(exemplar.work_type):
            continue  # never the task being judged; never a work type the frame dropped
        references.setdefault(exemplar.work_type, []).append(
            np.asarray(exemplar.vector, dtype=np.float64)
        )
    if not references:
        return unknown_frame(inputs, "similarity")
    names = sorted(references)
    # nearest reference per work type: its description or its closest past task
    nearest = {name: np.vstack(references[name]) for name in names}
    scores = {name: round(float(np.max(nearest[name] @ whole)), 6) for name in names}
    found = establish(scores, frame.establishment.thresholds_for("similarity"))
    if found.work_type is None:
        return unknown_frame(inputs, "similarity")
    per_signal = {
        name: np.max(nearest[name] @ each.T, axis=0) for name in names
    }  # work type -> each signal's similarity to its nearest reference
    chosen = per_signal[found.work_type]
    cited = [
        s.id
        for i, s in enumerate(signals)
        if all(chosen[i] >= per_signal[name][i] for name in names)
    ]
    best = int(np.argmax(chosen))  # first maximum: signals are in id order
    if not cited:
        cited = [signals[best].id]
    return inferred_frame(
        inputs,
        "similarity",
        found,
        work_type_cites=cited,
        objective=signals[best].content,
        objective_cites=(signals[best].id,),
    )
