"""The bench's prefix stability part: consecutive selections of one task sequence open with the
same routed envelope, and the figures are the ones the bundles give. No database."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from django.core.management import CommandError, call_command

from bench.generator import generate
from bench.parts.prefix_stability import sequences, targets, time_prefix, with_roots
from selection.engine.index import CorpusIndex
from selection.engine.metrics import prefix_stability
from selection.engine.pipeline import select
from selection.engine.types import SelectionRequest, WorkFrame

UNITS, SEED, COUNT, STEPS = 400, 3, 4, 4
TIMES = ("generate_s", "select_s")


@pytest.fixture(scope="module")
def part():
    return time_prefix(UNITS, SEED, COUNT, STEPS)


def _request(ask, frame) -> SelectionRequest:
    """The engine request an ask stands for, under `frame`: the bundles the part's figures must give."""
    return SelectionRequest(
        project_frame=frame,
        work_frame=WorkFrame(objective=ask.objective, work_type=ask.work_type, standpoint=ask.standpoint),
        query=ask.query, budget_tokens=ask.budget_tokens, condition=ask.condition,
        query_vector=ask.query_vector, objective_vector=ask.objective_vector,
    )


def _figures(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in TIMES}


def _opening(bundle, roots) -> str:
    """The rendered items a bundle opens with that carry a root constraint."""
    out = []
    for item in bundle.items:
        if item.sources[0] not in roots:
            break
        out.append(item.rendered)
    return "".join(out)


def test_a_sequence_is_one_piece_of_work_whose_query_moves():
    corpus = generate(UNITS, seed=SEED, tasks=0)
    work = sequences(corpus, COUNT, STEPS, SEED)
    assert [len(seq) for seq in work] == [STEPS] * COUNT
    # every project in turn
    assert [seq[0].project for seq in work] == corpus.slugs[:COUNT]
    for seq in work:
        first = seq[0]
        for step in seq[1:]:  # the frame, the work and the objective stay; the query moves
            assert step.project == first.project
            assert (step.objective, step.work_type, step.standpoint) == (
                first.objective, first.work_type, first.standpoint)
            assert step.objective_vector == first.objective_vector
            assert step.budget_tokens == first.budget_tokens and step.condition == "C6"
        assert len({s.query for s in seq}) == STEPS and len({s.query_vector for s in seq}) == STEPS
    assert sequences(corpus, COUNT, STEPS, SEED) == work  # seeded
    assert sequences(corpus, COUNT, STEPS, SEED + 1) != work


def test_consecutive_bundles_share_the_routed_prefix_as_the_bundles_show(part):
    # the part's figures against the bundles selected here, under the stable order
    corpus = generate(UNITS, seed=SEED, tasks=0)
    units, roots = with_roots(corpus)
    assert len(roots) == 3 * len(corpus.slugs) == part["root_units"]
    index = CorpusIndex.build(units, corpus.vectors)
    roots = set(roots)
    bundles = []
    for seq in sequences(corpus, COUNT, STEPS, SEED):
        frame = replace(corpus.frames[seq[0].project], bundle_order="stable")
        bundles.append([select(_request(r, frame), index).bundle for r in seq])
    stable = part["orders"]["stable"]
    assert stable["prefix_share"] == round(
        prefix_stability({str(i): [b.rendered for b in seq] for i, seq in enumerate(bundles)}), 4)
    shared, routed_same = [], []
    for seq in bundles:
        for a, b in zip(seq, seq[1:], strict=False):
            routed_same.append(_opening(a, roots) == _opening(b, roots) != "")
            shared.append(len(os.path.commonprefix([a.rendered, b.rendered])))
    assert all(routed_same) and stable["routed_prefix_identical"] == 1.0
    assert stable["shared_prefix_chars"] == round(sum(shared) / len(shared), 1)
    assert 0 < stable["routed_prefix_chars"] <= stable["shared_prefix_chars"] < stable["bundle_chars"]
    # the routed envelope is the project's three root constraints, whole items of the shared prefix
    assert stable["routed_items"] == 3 and 3 <= stable["shared_items"] < stable["bundle_items"]
    assert 0 < stable["prefix_share"] < 1 and stable["shared_prefix_tokens"] > 0
    assert part["pairs"] == COUNT * (STEPS - 1) == len(shared)


def test_each_order_is_measured_and_recorded_and_admits_the_same_units(part):
    rank, stable = part["orders"]["rank"], part["orders"]["stable"]
    assert "by rank inside a bucket" in rank["order_rule"]
    assert "by unit id inside a bucket (stable)" in stable["order_rule"]
    # both orders open with the routed envelope; only the evidence after it is ordered apart
    assert rank["routed_prefix_identical"] == stable["routed_prefix_identical"] == 1.0
    assert rank["routed_prefix_chars"] == stable["routed_prefix_chars"]
    assert rank["bundle_chars"] == stable["bundle_chars"] and part["same_admitted"] == 1.0
    assert rank != stable
    assert [t["met"] for t in targets(part)] == [True, True, True]
    # a target fails when a pair's routed prefix does
    broken = {**part, "orders": {**part["orders"], "rank": {**rank, "routed_prefix_identical": 0.75}}}
    assert [t["met"] for t in targets(broken)] == [False, True, True]


def test_the_same_seed_gives_the_same_figures(part):
    assert _figures(time_prefix(UNITS, SEED, COUNT, STEPS)) == _figures(part)
    assert _figures(time_prefix(UNITS, SEED + 1, COUNT, STEPS))["orders"] != part["orders"]


@pytest.mark.parametrize("option, value, named", [
    ("prefix_steps", 1, "--prefix-steps"),
    ("prefix_sequences", -1, "--prefix-sequences"),
    ("prefix_units", 10, "--prefix-units"),
])
def test_bad_prefix_options_are_refused_naming_the_option(option, value, named):
    with pytest.raises(CommandError, match=named):
        call_command("bench", sizes="300", **{option: value})
