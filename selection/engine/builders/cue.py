"""The cue builder: deterministic counting of each work type's cues over the signals' text."""

from __future__ import annotations

import re

from .common import BuilderInput, BuilderTools, establish, inferred_frame, ordered, unknown_frame


def cue_count(cue: str, text: str) -> int:
    """Whole-word, case-insensitive occurrences of a cue (a word or a phrase) in a text."""
    words = cue.lower().split()
    if not words:
        return 0
    pattern = r"(?<![\w])" + r"\s+".join(re.escape(w) for w in words) + r"(?![\w])"
    return len(re.findall(pattern, text.lower()))


def build_cue(inputs: BuilderInput, tools: BuilderTools):
    frame = inputs.project_frame
    signals = ordered(inputs.signals)
    # per work type, per signal: how many of its cues the signal carries
    hits: dict[str, dict[str, int]] = {}
    for name in frame.work_type_names:
        cues = frame.profile(name).cues
        if not cues:
            continue
        hits[name] = {s.id: sum(cue_count(c, s.content) for c in cues) for s in signals}
    if not hits:
        return unknown_frame(inputs, "cue")
    scores = {name: float(sum(per.values())) for name, per in hits.items()}
    found = establish(scores, frame.establishment.thresholds_for("cue"))
    if found.work_type is None:
        return unknown_frame(inputs, "cue")
    per = hits[found.work_type]
    cited = [sid for sid, n in per.items() if n > 0]
    # the objective is the builder's own: the signal that carries most of the work type's cues
    best = max(signals, key=lambda s: (per[s.id], -signals.index(s)), default=None)
    return inferred_frame(
        inputs,
        "cue",
        found,
        work_type_cites=cited,
        objective=best.content if best is not None and per[best.id] > 0 else "",
        objective_cites=(best.id,) if best is not None and per[best.id] > 0 else (),
    )
