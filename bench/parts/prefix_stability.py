"""Prefix stability between consecutive selections of one task sequence. No database:
`python -m bench.parts.prefix_stability [SEQUENCES [STEPS [UNITS]]]` runs it alone.

A task sequence is one piece of work selected again at every step as it proceeds, as an agent's
turns would: the same project, frame, work type, objective and objective vector, standpoint and
budget; only the query (its text and vector) moves. How the steps are formed, deterministically
from the seed (one numpy Generator seeded with [seed, 15], consumed in a fixed order):

  - the corpus is the bench generator's (`generate(units, seed)`), with each project's three
    oldest current units (lowest ids) marked `root`: its root constraints, the routed envelope
    every selection of the project opens with;
  - sequence s belongs to project s mod P (every project in turn); an anchor unit is drawn among
    the project's current units, and its topic's current units of that project, shuffled, are the
    trail the work walks;
  - step k's query is written from trail units k, k+1, k+2 (cyclically), as a generator task is
    from its three units: four words of each, and the mean of their vectors plus noise. Consecutive
    steps therefore share two of their three source units, the work moving one unit a step;
  - the work type is drawn from the project's frame, the objective is written from the anchor
    ("review" + seven of its words) and its vector sits near the topic's centre, as a generator
    task's.

Every step is selected at C6 through selection.serving.select_for_user (bench/held.py) under each
bundle order (`ProjectFrame.bundle_order`, `rank` and `stable`), with the same requests; order
never changes which units are admitted (`same_admitted`). The figures per order: the mean prefix
share of consecutive bundles (`prefix_stability` of `selection.engine.metrics`, which `evaluate`
reports too: common prefix characters / the later bundle's length), the share of consecutive pairs
whose routed prefix (the leading items that carry a routed unit) is non-empty and byte-identical,
and the mean shared prefix in characters, estimated tokens and whole items.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from bench.generator import SyntheticCorpus, generate
from bench.held import Ask, held, serve
from bench.stats import check, part_main
from bench.workload import unit_directions, written_from
from selection.engine.index import CorpusIndex
from selection.engine.metrics import prefix_share, prefix_stability
from selection.engine.outputs import SelectionResult
from selection.engine.types import ORDER_RULES, estimate_tokens

CONDITION = "C6"
ROOTS = 3  # root constraints a project: its oldest current units
WINDOW = 3  # units a step's query is written from (as a generator task's)
SALT = 15  # the sequences' Generator is seeded with [seed, SALT]
BUDGET_TOKENS = 1500  # a generator task's
ROUTED_IDENTICAL_MIN = 1.0  # every consecutive pair opens with the same routed bytes
SAME_ADMITTED_MIN = 1.0  # the bundle order never changes which units are admitted


def with_roots(corpus: SyntheticCorpus, per_project: int = ROOTS) -> tuple[list, list[str]]:
    """The corpus's units with each project's `per_project` oldest current units marked root, and
    their ids (units are in id order, which is creation order)."""
    marked: dict[str, int] = {}
    roots: list[str] = []
    units = []
    for unit in corpus.units:
        if unit.valid_to is None and marked.get(unit.project, 0) < per_project:
            marked[unit.project] = marked.get(unit.project, 0) + 1
            unit = replace(unit, root=True)
            roots.append(unit.id)
        units.append(unit)
    return units, roots


def sequences(corpus: SyntheticCorpus, count: int, steps: int, seed: int) -> list[list[Ask]]:
    """`count` task sequences of `steps` C6 asks each (module docstring), of the corpus's projects."""
    rng = np.random.default_rng([seed, SALT])
    units, vectors, topics, projects = corpus.units, corpus.vectors, corpus.topics, corpus.unit_projects
    current = np.asarray([u.valid_to is None for u in units])
    out: list[list[Ask]] = []
    for s in range(count):
        p = s % len(corpus.slugs)
        own = np.flatnonzero((projects == p) & current)
        anchor = int(own[int(rng.integers(0, own.size))])
        topic = int(topics[anchor])
        trail = rng.permutation(np.flatnonzero((topics == topic) & (projects == p) & current))
        frame = corpus.frames[corpus.slugs[p]]
        objective = "review " + " ".join(units[anchor].text.split(" ")[2:9])
        work_type = frame.work_types[int(rng.integers(0, len(frame.work_types)))][0]
        ov = corpus.centres[topic] + 0.45 * corpus.shared + 0.6 * unit_directions(rng, 1)[0]
        ov /= np.linalg.norm(ov)
        objective_vector = tuple(float(x) for x in ov)
        sequence = []
        for k in range(steps):
            rows = np.sort(trail[[(k + j) % trail.size for j in range(min(WINDOW, trail.size))]])
            query = written_from(rng, units, rows)
            qv = vectors[rows].mean(axis=0) + 0.25 * unit_directions(rng, 1)[0]
            qv /= np.linalg.norm(qv)
            sequence.append(
                Ask(
                    project=frame.project,
                    query=query,
                    objective=objective,
                    work_type=work_type,
                    budget_tokens=BUDGET_TOKENS,
                    condition=CONDITION,
                    standpoint=corpus.standpoint,
                    query_vector=tuple(float(x) for x in qv),
                    objective_vector=objective_vector,
                )
            )
        out.append(sequence)
    return out


def routed_prefix(result: SelectionResult) -> str:
    """The rendered leading items that carry a routed unit (the envelope the bundle opens with)."""
    return "".join(item.rendered for item in result.bundle.items[: _routed_items(result)])


def _routed_items(result: SelectionResult) -> int:
    envelope = frozenset(result.trace.routing.envelope if result.trace.routing else ())
    for n, item in enumerate(result.bundle.items):
        if item.sources[0] not in envelope:
            return n
    return len(result.bundle.items)


def order_figures(runs: list[list[SelectionResult]]) -> dict:
    """Prefix stability of consecutive selections, each inner list one sequence in step order."""
    rendered = {str(s): [r.bundle.rendered for r in seq] for s, seq in enumerate(runs)}
    shared, items, beyond, routed_same, same_bundle = [], [], [], [], []
    for seq in runs:
        for a, b in zip(seq, seq[1:], strict=False):
            text = b.bundle.rendered
            n = round(prefix_share(a.bundle.rendered, text) * len(text))  # its common prefix, exact
            shared.append(text[:n])
            ends = np.cumsum([len(item.rendered) for item in b.bundle.items])
            items.append(int(np.count_nonzero(ends <= n)))  # whole items the shared prefix covers
            routed_a, routed_b = routed_prefix(a), routed_prefix(b)
            routed_same.append(bool(routed_b) and routed_a == routed_b)
            beyond.append(max(0, n - len(routed_b)))
            same_bundle.append(a.bundle.digest == b.bundle.digest)
    results = [r for seq in runs for r in seq]
    return {
        "order_rule": results[0].trace.order_rule if results else "",
        "prefix_share": round(prefix_stability(rendered), 4),
        "routed_prefix_identical": _mean(routed_same),
        "shared_prefix_chars": _mean([len(p) for p in shared], 1),
        "shared_prefix_tokens": _mean([estimate_tokens(p) for p in shared], 1),
        "shared_beyond_routed_chars": _mean(beyond, 1),
        "shared_items": _mean(items, 2),
        "routed_prefix_chars": _mean([len(routed_prefix(r)) for r in results], 1),
        "routed_items": _mean([_routed_items(r) for r in results], 2),
        "bundle_items": _mean([len(r.bundle.items) for r in results], 2),
        "bundle_chars": _mean([len(r.bundle.rendered) for r in results], 1),
        "bundle_tokens": _mean([r.bundle.tokens for r in results], 1),
        "same_bundle": _mean(same_bundle),
    }


def _mean(values: list, digits: int = 4) -> float:
    return round(math.fsum(values) / len(values), digits) if values else 0.0


def time_prefix(units: int, seed: int, count: int, steps: int) -> dict:
    """The part: `count` sequences of `steps` selections on a generated corpus of `units` units,
    selected under each bundle order; deterministic in (units, seed, count, steps)."""
    if steps < 2:
        raise ValueError("a task sequence needs at least 2 steps (one consecutive pair)")
    begun = time.perf_counter()
    corpus = generate(units, seed=seed, tasks=0)
    rooted, roots = with_roots(corpus)
    index = CorpusIndex.build(rooted, corpus.vectors)
    work = sequences(corpus, count, steps, seed)
    generate_s = time.perf_counter() - begun
    begun = time.perf_counter()
    results: dict[str, list[list[SelectionResult]]] = {}
    asks = [ask for seq in work for ask in seq]
    for order in ORDER_RULES:
        frames = {slug: replace(frame, bundle_order=order) for slug, frame in corpus.frames.items()}
        ordered = held(frames, index, asks)
        results[order] = [[serve(ordered, ask) for ask in seq] for seq in work]
    select_s = time.perf_counter() - begun
    first, *others = ORDER_RULES
    admitted = [
        all(set(results[first][s][k].bundle.unit_ids()) == set(results[o][s][k].bundle.unit_ids())
            for o in others)
        for s in range(count) for k in range(steps)
    ]
    return {
        "units": units,
        "seed": seed,
        "condition": CONDITION,
        "projects": len(corpus.slugs),
        "root_units": len(roots),
        "sequences": count,
        "steps": steps,
        "pairs": count * (steps - 1),
        "generate_s": round(generate_s, 2),
        "select_s": round(select_s, 2),
        "same_admitted": _mean(admitted),
        "orders": {order: order_figures(runs) for order, runs in results.items()},
    }


def targets(prefix: dict) -> list[dict]:
    """Under every bundle order each consecutive pair of a sequence opens with the same routed
    envelope, byte for byte, and the order never changes which units a step admits."""
    at = f"{prefix['sequences']} sequences x {prefix['steps']} steps, {prefix['condition']}"
    checks = [
        check(f"consecutive selections with the same routed prefix, bundle order {order} ({at})",
              figures["routed_prefix_identical"], ">=", ROUTED_IDENTICAL_MIN, "")
        for order, figures in prefix["orders"].items()
    ]
    checks.append(check(f"steps admitting the same units under every bundle order ({at})",
                        prefix["same_admitted"], ">=", SAME_ADMITTED_MIN, ""))
    return checks


def describe(prefix: dict) -> str:
    orders = "; ".join(
        f"{order}: prefix share {f['prefix_share']}, routed prefix identical "
        f"{f['routed_prefix_identical']}, shared prefix {f['shared_prefix_chars']} chars "
        f"(~{f['shared_prefix_tokens']} tokens, {f['shared_items']} whole items; "
        f"{f['shared_beyond_routed_chars']} beyond the routed {f['routed_prefix_chars']}, "
        f"{f['routed_items']} items) of {f['bundle_chars']} ({f['bundle_items']} items)"
        for order, f in prefix["orders"].items()
    )
    return (
        f"[prefix] {prefix['sequences']} task sequences x {prefix['steps']} steps "
        f"({prefix['pairs']} consecutive pairs) at {prefix['condition']} on {prefix['units']} units, "
        f"{prefix['root_units']} root constraints: {orders}; same units admitted under every order "
        f"{prefix['same_admitted']}"
    )


if __name__ == "__main__":  # python -m bench.parts.prefix_stability [SEQUENCES [STEPS [UNITS]]]
    part_main(lambda count, steps, units: time_prefix(units, 7, count, steps), [16, 8, 10_000], describe, targets)
