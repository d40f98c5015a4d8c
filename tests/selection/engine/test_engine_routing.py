"""Deterministic routing: the seed's cases, in the engine, with no database."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest
import yaml
from engine_testkit import ALPHA, REPO, mini_request, mini_units, mk

from selection.corpus import read_corpus
from selection.corpus.memory_markdown import read_memory_directory
from selection.corpus.routing import routing_inputs_of
from selection.engine.index import CorpusIndex
from selection.engine.outputs import ContextTrace
from selection.engine.pipeline import select
from selection.engine.routing.globs import RoutePathError, matches, normalise, normalise_pattern
from selection.engine.routing.report import strict_refusal
from selection.engine.routing.route import route, structural_conflicts
from selection.engine.routing.types import RoutingInputs, RoutingPolicy, TaskCategory
from selection.engine.types import SelectionRequest, WorkFrame

POLICY = RoutingPolicy(
    task_categories=(
        TaskCategory("debugging", ("review", "release")),
        TaskCategory("implementation", ("review",), load=("rules/output",), load_if_present=("profiles/tone",)),
        TaskCategory("planning", ("release",), load=("rules/planning",), needs_scope=False),
    ),
    modules=(("areas/storage", ("a-storage",)), ("rules/output", ("a-output",)), ("rules/planning", ("a-plan",))),
    explicit=("a-docs",),
)
FRAME = replace(ALPHA, routing=POLICY)


def routed_units():
    return mini_units() + [
        mk("a-root", "Root constraint: all migrations must remain deterministic.", "rule", root=True),
        mk(
            "a-storage",
            "Storage area: notes persist as human-readable local JSON.",
            "decision",
            paths=("cli/**/*.py", "storage/*"),
        ),
        mk("a-web", "Web area: the frontend never stores tokens.", "rule", paths=("web/*",)),
        mk("a-output", "Output rule: answers lead with the diff.", "rule"),
        mk("a-plan", "Planning rule: plans list their risks first.", "rule"),
        mk("a-docs", "Docs profile: prefer concise explanations.", "prose"),
    ]


def run_route(units=None, **inputs):
    return route(units or routed_units(), project="alpha", policy=POLICY, inputs=RoutingInputs(**inputs))


def reason(report, uid):
    return report.disposition(uid).reason


# -- the glob dialect --------------------------------------------------------------------------


def test_double_star_matches_files_at_any_depth_including_none():
    assert matches("**/*.py", "a.py")
    assert matches("**/*.py", "cli/a.py")
    assert matches("**/*.py", "cli/memory_custodian/read.py")
    assert not matches("**/*.py", "cli/a.ts")


def test_single_star_stays_within_one_segment():
    assert matches("web/*", "web/a.ts")
    assert not matches("web/*", "web/a/b.ts")
    assert matches("src/?.py", "src/a.py") and not matches("src/?.py", "src/ab.py")


def test_backslashes_are_normalised_and_absolute_or_parent_paths_refused():
    assert normalise("cli\\memory_custodian\\read.py") == "cli/memory_custodian/read.py"
    assert normalise("./cli//a.py") == "cli/a.py"
    with pytest.raises(RoutePathError, match="'..'"):
        normalise("cli/../secrets/key.pem")
    with pytest.raises(RoutePathError, match="absolute"):
        normalise("/etc/passwd")
    with pytest.raises(RoutePathError, match="absolute"):
        normalise("C:\\work\\a.py")
    with pytest.raises(RoutePathError, match="whole segment"):
        normalise_pattern("**.py")


# -- dispositions and completeness ---------------------------------------------------------------


def test_path_routed_area_without_scope_is_incomplete_and_strict_exits_1():
    report = run_route(task_category="implementation")
    assert report.completeness == "INCOMPLETE"
    assert reason(report, "a-storage") == "SKIP_SCOPE_MISSING"
    assert report.disposition("a-storage").disposition == "skipped"
    assert reason(report, "a-root") == "ROUTE_ALWAYS"
    assert strict_refusal(report)[0] == 1


def test_planned_path_not_on_disk_still_routes():
    report = run_route(task_category="implementation", paths=("cli/memory_custodian/read.py",))
    assert report.completeness == "COMPLETE"
    assert reason(report, "a-storage") == "ROUTE_PATH"
    assert reason(report, "a-web") == "SKIP_NO_PATH_MATCH"
    assert "a-storage" in report.envelope
    assert strict_refusal(report) == (0, "")


def test_every_governed_unit_gets_exactly_one_disposition_with_its_reason():
    report = run_route(task_category="implementation", paths=("web/a/b.ts",))
    got = {d.unit: (d.disposition, d.reason) for d in report.dispositions}
    assert got == {
        "a-root": ("loaded", "ROUTE_ALWAYS"),
        "a-output": ("loaded", "ROUTE_TASK"),
        "a-storage": ("skipped", "SKIP_NO_PATH_MATCH"),
        "a-web": ("skipped", "SKIP_NO_PATH_MATCH"),  # web/* does not reach web/a/b.ts
        "a-plan": ("skipped", "SKIP_TASK_MISMATCH"),
        "a-docs": ("skipped", "SKIP_NOT_REQUESTED"),
        "profiles/tone": ("missing-optional", "MISSING_OPTIONAL"),
    }
    assert report.envelope[0] == "a-root"  # root constraints are admitted first
    assert report.completeness == "COMPLETE"  # an absent optional module is no gap


def test_explicit_overlay_loads_a_named_area_and_an_explicit_only_unit():
    report = run_route(task_category="implementation", overlays=("areas/storage", "a-docs"))
    assert reason(report, "a-storage") == "ROUTE_EXPLICIT"
    assert reason(report, "a-docs") == "ROUTE_EXPLICIT"
    assert reason(report, "a-web") == "SKIP_NOT_REQUESTED"
    assert report.completeness == "COMPLETE"


def test_missing_required_unit_is_incomplete_and_strict_exits_1():
    units = [u for u in routed_units() if u.id != "a-output"]
    report = run_route(units, task_category="implementation", paths=("cli/a.py",))
    assert report.disposition("rules/output").disposition == "missing-required"
    assert reason(report, "rules/output") == "MISSING_REQUIRED"
    assert report.completeness == "INCOMPLETE"
    assert strict_refusal(report)[0] == 1


def test_parent_path_is_invalid_and_strict_exits_2():
    report = run_route(task_category="implementation", paths=("cli/../../etc/passwd",))
    assert report.completeness == "INVALID"
    assert any("'..'" in p for p in report.problems)
    assert strict_refusal(report)[0] == 2


def test_category_mapping_to_two_work_types_is_ambiguous_never_guessed():
    report = run_route(task_category="debugging", paths=("cli/a.py",))
    assert report.completeness == "AMBIGUOUS"
    assert report.work_type is None
    assert strict_refusal(report)[0] == 1


def test_unknown_category_and_unknown_overlay_are_invalid():
    assert run_route(task_category="deploying", paths=("a.py",)).completeness == "INVALID"
    assert run_route(task_category="implementation", overlays=("areas/nowhere",)).completeness == "INVALID"


def test_scope_free_category_skips_areas_without_marking_the_request_incomplete():
    report = run_route(task_category="planning")
    assert report.completeness == "COMPLETE"
    assert reason(report, "a-storage") == "SKIP_NOT_REQUESTED"
    assert reason(report, "a-plan") == "ROUTE_TASK"
    assert report.work_type == "release"


def test_invalid_unit_pattern_is_reported_invalid():
    units = routed_units() + [mk("a-bad", "Bad area.", "rule", paths=("src/**.py",))]
    report = run_route(units, task_category="implementation", paths=("a.py",))
    assert report.disposition("a-bad").disposition == "invalid"
    assert reason(report, "a-bad") == "ROUTE_INVALID"
    assert report.completeness == "INVALID"


def test_path_and_overlay_order_and_repetition_change_nothing():
    paths = ["cli/a.py", "web/x.ts", "cli\\a.py", "storage/db.json"]
    reports = {
        run_route(task_category="implementation", paths=tuple(p), overlays=tuple(o))
        for p in itertools.permutations(paths)
        for o in (("a-docs", "areas/storage"), ("areas/storage", "a-docs", "a-docs"))
    }
    assert len(reports) == 1


# -- structural conflicts ------------------------------------------------------------------------


def owners():
    return routed_units() + [
        mk("a-json", "Sessions persist as JSON files.", "decision", subject="session-store", facet="format", root=True),
        mk("a-sqlite2", "Sessions persist in SQLite.", "decision", subject="session-store", facet="format", root=True),
    ]


def test_two_owners_of_one_subject_and_facet_conflict_and_strict_exits_2():
    report = run_route(owners(), task_category="implementation", paths=("cli/a.py",))
    assert [(c.code, c.units) for c in report.conflicts] == [("SUBJECT_FACET_CONFLICT", ("a-json", "a-sqlite2"))]
    status, why = strict_refusal(report)
    assert status == 2 and "a person must decide" in why


def test_supersession_between_owners_resolves_the_conflict():
    units = [replace(u, supersedes=("a-json",)) if u.id == "a-sqlite2" else u for u in owners()]
    assert structural_conflicts(units) == ()
    assert run_route(units, task_category="implementation", paths=("a.py",)).conflicts == ()


# -- the pipeline: envelope first, budget, strict refusal, local overlays -------------------------


def request(**routing):
    return mini_request("C6", frame=FRAME, routing=RoutingInputs(**routing))


def test_root_units_are_admitted_first_on_every_condition():
    index = CorpusIndex.build(routed_units())
    for condition in ("C0", "C2", "C4", "C6"):
        result = select(replace(request(), condition=condition), index)
        assert result.bundle.items[0].sources == ("a-root",)
        assert result.trace.candidate("a-root").reason_code == "ROUTE_ALWAYS"


def test_routed_units_are_budgeted_first_and_a_dropped_one_is_a_budget_omission():
    index = CorpusIndex.build(routed_units())
    result = select(replace(request(task_category="implementation", paths=("cli/a.py",)), budget_tokens=40), index)
    routing = result.trace.routing
    assert result.bundle.items[0].sources == ("a-root",)
    assert routing.budget_omissions  # some routed unit did not fit
    for uid in routing.budget_omissions:
        assert result.trace.candidate(uid).reason_code == "OMIT_BUDGET"
        assert result.trace.candidate(uid).disposition == "budget_omitted"
        # a budget omission is not a routing skip: its routing disposition stays "loaded"
        assert routing.disposition(uid).disposition == "loaded"


def test_strict_routing_refuses_without_a_bundle_and_traces_the_refusal():
    index = CorpusIndex.build(routed_units())
    result = select(request(task_category="implementation", strict=True), index)
    assert result.bundle.items == ()
    assert result.trace.routing.refused
    assert "INCOMPLETE" in result.trace.routing.refusal
    assert result.trace.stages[0].stage == "routing"
    # and without strict the same request returns its bundle with the diagnostics
    loose = select(request(task_category="implementation"), index)
    assert loose.bundle.items and loose.trace.routing.completeness == "INCOMPLETE"


def test_strict_complete_request_gets_its_bundle():
    index = CorpusIndex.build(routed_units())
    result = select(request(task_category="implementation", paths=("cli/a.py",), strict=True), index)
    assert not result.trace.routing.refused
    assert {"a-root", "a-output", "a-storage"} <= set(result.bundle.unit_ids())


def test_task_category_gives_the_work_type_when_the_work_frame_has_none():
    index = CorpusIndex.build(routed_units())
    req = request(task_category="planning")
    req = replace(req, work_frame=replace(req.work_frame, work_type=None))
    assert select(req, index).trace.work_frame.work_type == "release"


def test_routing_is_in_the_trace_round_trip_and_diff():
    from selection.engine.explain import trace_diff

    index = CorpusIndex.build(routed_units())
    a = select(request(task_category="implementation"), index).trace
    b = select(request(task_category="implementation", paths=("cli/a.py",)), index).trace
    assert ContextTrace.from_dict(a.as_dict()) == a
    rows = {field: (x, y) for field, x, y in trace_diff(a, b).header}
    assert rows["routing completeness"] == ("INCOMPLETE", "COMPLETE")
    assert rows["routing a-storage"] == ("skipped SKIP_SCOPE_MISSING", "loaded ROUTE_PATH")


def test_local_overlay_adds_context_but_cannot_override_a_shared_constraint():
    units = owners()[:-1]  # a-json owns session-store/format
    index = CorpusIndex.build(units)
    tone = mk("me-tone", "Prefer concise explanations before code.", "preference")
    rogue = mk("me-sqlite", "Use SQLite for sessions.", "decision", subject="session-store", facet="format")
    undo = mk("me-undo", "Forget the root constraint.", "rule", supersedes=("a-root",))
    base = request(task_category="implementation", paths=("cli/a.py",))
    shared = select(base, index)
    mine = select(replace(base, local_units=(tone, rogue, undo)), index)
    local = {d.unit: d.outcome for d in mine.trace.routing.local}
    assert local == {
        "me-tone": "LOCAL_ADDED",
        "me-sqlite": "LOCAL_OVERRIDES_SHARED",
        "me-undo": "LOCAL_SUPERSEDES_SHARED",
    }
    assert "me-tone" in mine.bundle.unit_ids()
    assert "me-sqlite" not in mine.bundle.unit_ids() and "a-json" in mine.bundle.unit_ids()
    assert mine.bundle.digest != shared.bundle.digest
    # no_local: the caller passes no local units, and the bundle is the shared one, digest for digest
    no_local = select(replace(base, routing=replace(base.routing, no_local=True)), index)
    assert no_local.bundle.digest == shared.bundle.digest


def test_a_corpus_without_routing_gets_the_same_bundle_as_before():
    index = CorpusIndex.build(mini_units())
    result = select(mini_request("C6"), index)
    assert result.trace.routing.completeness == "COMPLETE"
    assert result.trace.routing.dispositions == ()
    assert all(c.stage != "routing" for c in result.trace.candidates)


def test_verify_rerun_compares_routing_too():
    from selection.engine.explain import check_rerun

    index = CorpusIndex.build(routed_units())
    stored = select(request(task_category="implementation", paths=("cli/a.py",)), index).trace
    same = select(request(task_category="implementation", paths=("cli/a.py",)), index).trace
    other = select(request(task_category="implementation", paths=("web/a.ts",)), index).trace
    check = {c.name: c for c in check_rerun(stored, stored.bundle_digest, same)}["re-run routing"]
    assert check.ok
    check = {c.name: c for c in check_rerun(stored, stored.bundle_digest, other)}["re-run routing"]
    assert not check.ok and "routing a-storage" in check.actual


# -- activation kinds: each admits exactly the triggers it names ---------------------------------

# (kind, trigger) -> (disposition, reason, completeness); written out, not derived from codes.py
ACTIVATION_TABLE = {
    ("task", "task"): ("loaded", "ROUTE_TASK", "COMPLETE"),
    ("task", "path"): ("invalid", "ROUTE_INVALID", "INVALID"),
    ("task", "explicit"): ("invalid", "ROUTE_INVALID", "INVALID"),
    ("explicit-only", "task"): ("invalid", "ROUTE_INVALID", "INVALID"),
    ("explicit-only", "path"): ("invalid", "ROUTE_INVALID", "INVALID"),
    ("explicit-only", "explicit"): ("loaded", "ROUTE_EXPLICIT", "COMPLETE"),
    ("task-or-explicit", "task"): ("loaded", "ROUTE_TASK", "COMPLETE"),
    ("task-or-explicit", "path"): ("invalid", "ROUTE_INVALID", "INVALID"),
    ("task-or-explicit", "explicit"): ("loaded", "ROUTE_EXPLICIT", "COMPLETE"),
    ("path", "task"): ("invalid", "ROUTE_INVALID", "INVALID"),
    ("path", "path"): ("loaded", "ROUTE_PATH", "COMPLETE"),
    ("path", "explicit"): ("invalid", "ROUTE_INVALID", "INVALID"),
    ("path-or-explicit", "task"): ("invalid", "ROUTE_INVALID", "INVALID"),
    ("path-or-explicit", "path"): ("loaded", "ROUTE_PATH", "COMPLETE"),
    ("path-or-explicit", "explicit"): ("loaded", "ROUTE_EXPLICIT", "COMPLETE"),
}


@pytest.mark.parametrize(("kind", "trigger"), sorted(ACTIVATION_TABLE))
def test_each_activation_kind_admits_exactly_the_triggers_it_names(kind, trigger):
    """One module `m` of one unit `x`; the trigger fires by the task category, a path or an overlay.

    The unit carries `paths` when its kind is path-activated or the trigger is a path (a frame
    whose unit has paths its activation does not admit is itself refused)."""
    paths = ("cli/**",) if kind.startswith("path") or trigger == "path" else ()
    units = [*mini_units(), mk("x", "Module x: one governed rule.", "rule", paths=paths)]
    policy = RoutingPolicy(
        task_categories=(
            TaskCategory("impl", ("review",), load_if_present=("m",) if trigger == "task" else (), needs_scope=False),
        ),
        modules=(("m", ("x",)),),
        activation=(("m", kind),),
    )
    inputs = {
        "task": RoutingInputs(task_category="impl"),
        "path": RoutingInputs(task_category="impl", paths=("cli/a.py",)),
        "explicit": RoutingInputs(task_category="impl", overlays=("m",)),
    }[trigger]
    report = route(units, project="alpha", policy=policy, inputs=inputs)
    d = report.disposition("x")
    assert (d.disposition, d.reason, report.completeness) == ACTIVATION_TABLE[(kind, trigger)]
    if d.reason == "ROUTE_INVALID":
        assert f'activation "{kind}"' in d.detail and "does not admit it" in d.detail
        assert "x" not in report.envelope
        assert any(f'activation "{kind}"' in p for p in report.problems)
        assert strict_refusal(report)[0] == 2
    else:
        assert report.envelope == ("x",) and strict_refusal(report) == (0, "")


def test_an_explicit_request_for_a_path_only_area_is_refused_even_when_a_path_loads_it():
    units = [*mini_units(), mk("x", "Module x: one governed rule.", "rule", paths=("cli/**",))]
    policy = RoutingPolicy(
        task_categories=(TaskCategory("impl", ("review",)),), modules=(("m", ("x",)),), activation=(("m", "path"),)
    )
    inputs = RoutingInputs(task_category="impl", paths=("cli/a.py",), overlays=("x",))
    report = route(units, project="alpha", policy=policy, inputs=inputs)
    assert report.disposition("x").reason == "ROUTE_PATH"  # what loaded it; the overlay did not
    assert report.completeness == "INVALID"
    assert any('requested by overlay "x"' in p for p in report.problems)


def test_a_name_without_activation_admits_every_trigger_as_before():
    report = run_route(task_category="implementation", overlays=("areas/storage",))
    assert reason(report, "a-storage") == "ROUTE_EXPLICIT" and report.completeness == "COMPLETE"


# -- root units first, on every corpus we ship or import -----------------------------------------


def _corpora(tmp_path):
    """(name, CorpusData): every fixtures/ and fixtures/test/ corpus, and the markdown memory fixture
    as imported."""
    shipped = [p.parent for glob in ("*/corpus.yaml", "test/*/corpus.yaml") for p in (REPO / "fixtures").glob(glob)]
    out = [(d.name, read_corpus(d)) for d in sorted(shipped)]
    memory = REPO / "tests" / "selection" / "fixtures" / "nightnotes-memory"
    frame, units = read_memory_directory(memory, project="nightnotes")
    target = tmp_path / "nightnotes"
    target.mkdir()
    doc = {"name": "nightnotes", "projects": [{"slug": "nightnotes", "name": "nightnotes", "frame": frame}]}
    (target / "corpus.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    (target / "units.jsonl").write_text("".join(json.dumps(u) + "\n" for u in units), encoding="utf-8")
    out.append(("nightnotes-memory", read_corpus(target)))
    return out


def test_root_units_are_admitted_first_on_every_corpus(tmp_path):
    checked = 0
    for name, data in _corpora(tmp_path):
        units = [r.unit for r in data.units]
        index = CorpusIndex.build(units)
        superseded = {old for u in units for old in u.supersedes}
        for spec in data.projects:
            roots = {u.id for u in units if u.root and u.project == spec.slug and u.id not in superseded}
            if not roots:
                continue
            tasks = [t for t in data.tasks if t.project == spec.slug] or [None]
            for task in tasks:
                frame = task.frame if task and task.frame else None
                work = WorkFrame(
                    objective=frame.objective if frame else "Change the project.",
                    work_type=frame.work_type if frame else None,
                    standpoint=task.standpoint if task else None,
                )
                routing = routing_inputs_of(task.routing if task else None)
                for condition in ("C0", "C2", "C4", "C6"):
                    request = SelectionRequest(
                        project_frame=spec.project_frame,
                        work_frame=work,
                        query=task.query if task else "Change how the project stores its data.",
                        budget_tokens=task.budget_tokens if task else 2000,
                        condition=condition,
                        standpoint=task.standpoint if task else None,
                        routing=routing,
                    )
                    result = select(request, index)
                    sources = [set(item.sources) for item in result.bundle.items]
                    at = [i for i, s in enumerate(sources) if s & roots]
                    omitted = set(result.trace.routing.budget_omissions)
                    assert roots - omitted <= set().union(*sources), (name, spec.slug, condition)
                    assert at == list(range(len(at))), (name, spec.slug, condition, sources[: len(at) + 1])
                    checked += 1
    print(f"\n{checked} selections, root units first in each")
    assert checked >= 4 * 2  # context-lab's tasks and the markdown memory, at every condition
