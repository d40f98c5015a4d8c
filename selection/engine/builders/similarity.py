"""The similarity builder: the loaded embedding model compares the signals with each work type's
description and with past tasks whose work type a person declared (nearest neighbour, never the
task being judged). Needs no cues. How sure it may be is calibrated on those same past tasks, each
read leave-one-out (EstablishmentPolicy.calibration)."""

# Measured on fixtures/context-lab (docs/results.md): the description alone picked 6 of 12 work
# types, the nearest past task alone 2 of 12 (few tasks per type, shared vocabulary), their max 4;
# the mean of the two keeps the description's 6 while letting neighbours count where they agree.

from __future__ import annotations

import numpy as np

from .common import (
    BuilderInput,
    BuilderTools,
    Case,
    calibrate,
    establish,
    inferred_frame,
    ordered,
    signals_text,
    unknown_frame,
)

NEIGHBOURS = 3  # past tasks per work type that vote


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
    descriptions = {
        name: vector for (name, _), vector in zip(described, vectors[1 + len(signals) :], strict=True)
    }
    neighbours: dict[str, list[tuple[str, np.ndarray]]] = {}
    calibration: list[tuple[str, str, np.ndarray]] = []
    for exemplar in sorted(inputs.exemplars, key=lambda e: e.task_id):
        if exemplar.task_id == inputs.task_id or not frame.lists(exemplar.work_type):
            continue  # never the task being judged; never a work type the frame dropped
        vector = np.asarray(exemplar.vector, dtype=np.float64)
        neighbours.setdefault(exemplar.work_type, []).append((exemplar.task_id, vector))
        calibration.append((exemplar.task_id, exemplar.work_type, vector))
    names = sorted(set(descriptions) | set(neighbours))
    if not names:
        return unknown_frame(inputs, "similarity")

    def score(name: str, query: np.ndarray, skip: str | None = None) -> np.ndarray | None:
        """The mean of the description's similarity and the mean similarity of the work type's
        NEIGHBOURS nearest past tasks (either alone when the other is missing); `skip` is a past
        task left out of the neighbours (the calibration case being read)."""
        parts = []
        if name in descriptions:
            parts.append(descriptions[name] @ query)
        near = [v for task_id, v in neighbours.get(name, ()) if task_id != skip]
        if near:
            sims = np.sort(np.vstack(near) @ query, axis=0)[::-1]
            parts.append(np.mean(sims[:NEIGHBOURS], axis=0))
        return np.mean(np.asarray(parts), axis=0) if parts else None

    def read(query: np.ndarray, skip: str | None = None) -> dict[str, float]:
        scored = {name: score(name, query, skip) for name in names}
        return {name: round(float(value), 6) for name, value in scored.items() if value is not None}

    thresholds = frame.establishment.thresholds_for("similarity")
    # leave-one-out over the project's declared past tasks: each read with every other past task
    # (never itself, never the task being judged) as neighbours, as this task is read
    cases = []
    for task_id, work_type, vector in calibration:
        known = establish(read(vector, skip=task_id), thresholds)
        cases.append(Case(task_id, known.margin, known.work_type == work_type))
    found = calibrate(establish(read(whole), thresholds), cases, thresholds, frame.establishment)
    if found.work_type is None:
        return unknown_frame(inputs, "similarity")
    # work type -> each signal's own score, to cite the signals that point at the chosen type
    per_signal = {name: score(name, each.T) for name in names}
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
