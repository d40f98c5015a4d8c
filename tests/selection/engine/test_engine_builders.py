"""Frame builders: establishment from signals, cited signals, abstention as frame policy."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from engine_testkit import ALPHA, hash_vectors, mini_request, mini_units, mini_work

from selection.engine import CorpusIndex, select
from selection.engine.builders import (
    BuilderInput,
    BuilderTools,
    Exemplar,
    UnknownBuilder,
    build_work_frame,
    get_builder,
)
from selection.engine.builders.cue import cue_count
from selection.engine.policy import UnknownWorkType, merged_order
from selection.engine.types import (
    EstablishmentPolicy,
    WorkFrame,
    WorkSignal,
    WorkTypeProfile,
)

FRAME = replace(
    ALPHA,
    work_type_profiles=(
        WorkTypeProfile("release", "Deciding what is still open before a release.", ("release", "ship", "open items")),
        WorkTypeProfile("review", "Judging whether the mechanism beats the baseline.", ("review", "baseline")),
    ),
)


def sig(sid: str, content: str, kind: str = "user_message") -> WorkSignal:
    return WorkSignal(sid, kind, content)


def embed(texts):
    """Unit-length bag-of-words vectors: the embedding model's contract, without the model."""
    vectors = hash_vectors(list(texts))
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return [tuple(float(x) for x in v) for v in vectors]


def test_registry_rejects_unknown_builder_names():
    with pytest.raises(UnknownBuilder, match="known: declared, cue, similarity, model"):
        get_builder("keyword")


def test_cue_counting_is_whole_word_and_case_insensitive():
    assert cue_count("open items", "Two Open  items and one reopened item") == 1
    assert cue_count("ship", "shipping will ship; SHIP") == 2


def test_cue_builder_confident_frame_cites_its_signals_and_writes_its_own_objective():
    inputs = BuilderInput(
        signals=(
            sig("s1", "Can we ship the release on Friday?"),
            sig("s2", "Three open items remain.", "project_state"),
            sig("s3", "The weather is fine.", "event"),
        ),
        project_frame=FRAME,
    )
    frame = build_work_frame("cue", inputs)
    assert frame.work_type == "release" and frame.establishment == "inferred-confident"
    assert frame.builder == "cue" and frame.runner_up == "review" and frame.margin == 3.0
    assert frame.cited("work_type") == ("s1", "s2")
    assert frame.objective == "Can we ship the release on Friday?"
    assert frame.objective_by == "cue" and frame.cited("objective") == ("s1",)


def test_cue_builder_without_cues_or_hits_is_unknown():
    no_hit = BuilderInput(signals=(sig("s1", "Hello there."),), project_frame=FRAME)
    assert build_work_frame("cue", no_hit).establishment == "unknown"
    no_cues = BuilderInput(signals=(sig("s1", "ship the release"),), project_frame=ALPHA)
    frame = build_work_frame("cue", no_cues)
    assert frame.establishment == "unknown" and frame.work_type is None and frame.cites == ()


def test_a_task_built_to_be_ambiguous_is_never_a_confident_wrong_frame():
    # one cue for each work type: the builder must not pretend to know which
    inputs = BuilderInput(
        signals=(sig("s1", "Review the release."),), project_frame=FRAME
    )
    frame = build_work_frame("cue", inputs)
    assert frame.establishment == "inferred-ambiguous"
    assert frame.plausible_work_types == ("release", "review") and frame.margin == 0.0
    result = select(mini_request("C6", work=frame), CorpusIndex.build(mini_units()))
    assert result.trace.effective_condition == "C6~merged"
    assert result.trace.class_order == merged_order(
        [ALPHA.classes_for("release"), ALPHA.classes_for("review")]
    )
    assert "plausible work types release, review" in result.trace.class_order_reason


def test_similarity_uses_descriptions_and_neighbours_never_the_task_itself():
    signals = (sig("s1", "Judging whether the mechanism beats the baseline."),)
    inputs = BuilderInput(signals=signals, project_frame=FRAME, task_id="t1")
    frame = build_work_frame("similarity", inputs, BuilderTools(embed=embed))
    assert frame.work_type == "review" and frame.establishment == "inferred-confident"
    assert frame.cited("work_type") == ("s1",) and frame.objective_by == "similarity"
    # no descriptions, no cues: past declared tasks decide; the judged task's own vector is ignored
    bare = replace(FRAME, work_type_profiles=())
    text = "Can we ship it on Friday?"
    own = Exemplar("t1", "review", tuple(embed([text])[0]))
    other = Exemplar("t2", "release", tuple(embed([text + " soon"])[0]))
    inputs = BuilderInput(
        signals=(sig("s1", text),), project_frame=bare, task_id="t1", exemplars=(own, other)
    )
    frame = build_work_frame("similarity", inputs, BuilderTools(embed=embed))
    assert frame.work_type == "release"
    assert build_work_frame(
        "similarity", replace(inputs, exemplars=(own,)), BuilderTools(embed=embed)
    ).establishment == "unknown"


def test_similarity_thresholds_are_frame_policy():
    signals = (sig("s1", "Judging whether the mechanism beats the baseline."),)
    strict = replace(
        FRAME,
        establishment=EstablishmentPolicy(
            thresholds=(replace(FRAME.establishment.thresholds_for("similarity"), margin=5.0),)
        ),
    )
    frame = build_work_frame(
        "similarity", BuilderInput(signals=signals, project_frame=strict), BuilderTools(embed=embed)
    )
    assert frame.establishment == "inferred-ambiguous"


def test_declared_builder_refuses_an_unlisted_work_type():
    inputs = BuilderInput(
        signals=(), project_frame=FRAME, declared=mini_work(work_type="architecture")
    )
    with pytest.raises(UnknownWorkType, match='"architecture" is not listed by the alpha frame v3'):
        build_work_frame("declared", inputs)
    kept = build_work_frame("declared", replace(inputs, declared=mini_work()))
    assert kept.establishment == "declared" and kept.work_type == "review"


def test_engine_never_silently_falls_back_for_an_unlisted_declared_work_type():
    index = CorpusIndex.build(mini_units())
    with pytest.raises(UnknownWorkType):
        select(mini_request("C6", work=mini_work(work_type="nonesuch")), index)
    declared = select(mini_request("C6"), index)
    assert declared.trace.class_order == ALPHA.classes_for("review")
    assert declared.trace.class_order_reason == "work type review: its listed classes"
    c3 = select(mini_request("C3"), index)
    assert c3.trace.class_order == ("result",) and "default_classes" in c3.trace.class_order_reason
    unknown = select(
        mini_request("C6", work=WorkFrame(establishment="unknown", work_type=None)), index
    )
    assert unknown.trace.class_order == ()
    assert unknown.trace.class_order_reason.startswith("none: work frame unknown")


def test_merged_order_interleaves_lists_best_first():
    assert merged_order([("a", "b", "c"), ("d", "a", "e")]) == ("a", "d", "b", "c", "e")
    assert merged_order([]) == ()


def test_every_trace_json_carries_the_establishment():
    frame = build_work_frame(
        "cue", BuilderInput(signals=(sig("s1", "Ship the release."),), project_frame=FRAME)
    )
    doc = select(mini_request("C6", work=frame), CorpusIndex.build(mini_units())).trace.as_dict()
    work = doc["work_frame"]
    assert (work["establishment"], work["builder"], work["runner_up"]) == (
        "inferred-confident", "cue", "review"
    )
    assert work["cites"] == [["objective", ["s1"]], ["work_type", ["s1"]]]
    assert doc["class_order_reason"] == "work type release: its listed classes"
    assert isinstance(np.float64(work["margin"]), np.float64)


def test_a_wrong_work_type_is_established_against_the_builders_own_scores():
    from selection.engine.builders import establishment_of

    thresholds = FRAME.establishment.thresholds_for("cue")
    signals = (sig("s1", "Ship the release; review it."), sig("s2", "Ship it."))
    built = build_work_frame("cue", BuilderInput(signals=signals, project_frame=FRAME))
    assert built.scores == (("release", 3.0), ("review", 1.0)) and built.establishment == "inferred-confident"
    # the signals point elsewhere: the wrong frame is unknown, not a confident frame
    wrong = establishment_of(built, "review", thresholds)
    assert wrong.work_type == "review" and wrong.establishment == "unknown"
    assert wrong.cited("work_type") == ()
    assert establishment_of(built, "release", thresholds).establishment == "inferred-confident"
    tie = build_work_frame("cue", BuilderInput(signals=(sig("s1", "Review the release."),), project_frame=FRAME))
    held = establishment_of(tie, "review", thresholds)
    assert held.establishment == "inferred-ambiguous" and held.plausible_work_types == ("release", "review")
