"""Bounded routing: a unit routing did not load never reaches the bundle through ranking, on random
manifests and requests (hypothesis): not in the bundle, not admitted in the trace, not in the JSON
summary, and the trace page's routing section never marks one as let in. The envelope policy keeps
today's behaviour, labelled."""

from __future__ import annotations

from dataclasses import replace

from custodian_kit import AREA_BACKEND, BACKEND, read, tree
from django.template.loader import render_to_string
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selection.engine.index import CorpusIndex
from selection.engine.pipeline import select
from selection.engine.routing.report import not_loaded, routing_summary
from selection.engine.routing.types import RoutingInputs, RoutingPolicy, TaskCategory
from selection.engine.types import ProjectFrame, SelectionRequest, Unit, WorkFrame

WORDS = ("storage", "notes", "json", "cli", "web", "token", "session", "migration", "review", "plan")
PATTERNS = ("cli/**", "web/*", "**/*.py", "docs/*.md")
PATHS = ("cli/a.py", "web/x.ts", "docs/r.md", "lib/deep/m.py")
AREA = "mc-area-20260801-11111111"


@st.composite
def corpora(draw):
    n = draw(st.integers(3, 12))
    units = []
    for i in range(n):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=6))
        units.append(
            Unit(
                id=f"u{i}",
                project="p",
                evidence_class=draw(st.sampled_from(("rule", "decision", "note"))),
                text=" ".join(words) + f" unit {i}.",
                root=draw(st.booleans()) and draw(st.booleans()),
                paths=tuple(draw(st.lists(st.sampled_from(PATTERNS), max_size=2, unique=True))),
            )
        )
    names = [f"m{j}" for j in range(draw(st.integers(1, 4)))]
    modules = {name: [] for name in names}
    for u in units:
        owner = draw(st.sampled_from([*names, None]))
        if owner:
            modules[owner].append(u.id)
    loadable = [*names, "missing"]
    categories = tuple(
        TaskCategory(
            name,
            (name,),
            load=tuple(draw(st.lists(st.sampled_from(loadable), max_size=2, unique=True))),
            load_if_present=tuple(draw(st.lists(st.sampled_from(loadable), max_size=2, unique=True))),
            needs_scope=draw(st.booleans()),
        )
        for name in ("implementation", "planning")[: draw(st.integers(1, 2))]
    )
    explicit = tuple(draw(st.lists(st.sampled_from(names), max_size=1)))
    policy = RoutingPolicy(
        task_categories=categories,
        modules=tuple(sorted((k, tuple(v)) for k, v in modules.items())),
        explicit=explicit,
        mode="bounded",
    )
    inputs = RoutingInputs(
        task_category=draw(st.sampled_from([None, "implementation", "planning", "development", "nope"])),
        paths=tuple(draw(st.lists(st.sampled_from(PATHS), max_size=2))),
        overlays=tuple(draw(st.lists(st.sampled_from(names), max_size=2, unique=True))),
    )
    query = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
    return units, policy, inputs, query, draw(st.integers(20, 400)), draw(st.sampled_from(("C0", "C4", "C6")))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora())
def test_bounded_routing_never_admits_a_unit_it_did_not_load(case):
    units, policy, inputs, query, budget, condition = case
    frame = ProjectFrame(
        project="p",
        version=1,
        scope=("p",),
        default_classes=("rule", "decision", "note"),
        routing=policy,
        work_types=(("implementation", ("rule", "decision", "note")), ("planning", ("note", "rule"))),
    )
    request = SelectionRequest(
        project_frame=frame,
        work_frame=WorkFrame(objective="Change the store."),
        query=query,
        budget_tokens=budget,
        condition=condition,
        routing=inputs,
    )
    result = select(request, CorpusIndex.build(units))
    report = result.trace.routing
    barred = not_loaded(report)
    admitted = set(result.bundle.unit_ids())
    assert not barred & admitted
    assert report.ranked_in == ()
    trace = result.trace.as_dict()
    reached = {c["unit_id"] for c in trace["candidates"] if c["disposition"] in ("admitted", "folded")}
    assert not barred & reached
    summary = routing_summary(report)
    skipped = {d["unit"] for d in summary["dispositions"] if d["disposition"] != "loaded"}
    assert not skipped & admitted and summary["policy"] == "bounded"
    page = render_to_string("selection/trace_routing.html", {"routing": report})
    assert "admitted by ranking" not in page and "<strong>bounded</strong>" in page


def test_envelope_policy_keeps_ranked_fill_and_names_what_ranking_let_in(tmp_path):
    root = tree(tmp_path / "p", {"areas/backend.md": BACKEND}, optional=AREA_BACKEND)
    query = "storage layer writes through one module"
    bounded = read(root, "implementation", paths=["web/a.ts"], query=query)
    envelope = read(root, "implementation", paths=["web/a.ts"], query=query, policy="envelope")
    assert AREA not in bounded.bundle_units and bounded.trace.routing.mode == "bounded"
    assert AREA in envelope.bundle_units  # today's behaviour, kept under "envelope"
    assert envelope.trace.routing.ranked_in == (AREA,)
    assert envelope.doc["data"]["routing_policy"] == "envelope"


def test_an_imported_peer_layout_is_bounded_by_default(tmp_path):
    root = tree(tmp_path / "p", {})
    got = read(root, "implementation")
    assert got.trace.routing.mode == "bounded"
    assert replace(got.trace.routing, mode="envelope").mode == "envelope"
