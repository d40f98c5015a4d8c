"""route(): one disposition per governed unit from declared inputs; no scoring, no guessing.

Governed units are the units of the frame's own project that are not superseded by a unit of the
corpus: root units (always), area units (`paths`), units a task category loads, and units only an
explicit overlay loads. Everything else is ordinary evidence for the ranked ladder.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from ..index.units import UnitTable
from ..types import Unit
from .codes import (
    ACTIVATION_TRIGGERS,
    LOAD_ORDER,
    ROUTE_DISPOSITION,
    TRIGGER_EXPLICIT,
    TRIGGER_PATH,
    TRIGGER_TASK,
    Completeness,
    ConflictCode,
    LocalCode,
    RouteCode,
)
from .custodian import resolve_task
from .globs import RoutePathError, matches, normalise, normalise_pattern
from .types import (
    Conflict,
    LocalDisposition,
    RoutingInputs,
    RoutingPolicy,
    RoutingReport,
    UnitDisposition,
)


def superseded_ids(units: Iterable[Unit]) -> frozenset[str]:
    """Ids that some unit of the corpus supersedes: history, not governed and never in conflict."""
    return frozenset(old for u in units for old in u.supersedes)


def _active(unit: Unit, superseded: frozenset[str], standpoint: datetime | None) -> bool:
    if unit.id in superseded:
        return False
    if standpoint is not None and unit.valid_to is not None and unit.valid_to <= standpoint:
        return False
    return True


class RoutingCorpus:
    """What routing reads of a corpus, computed once per units tuple: a selection then costs
    O(governed units), not O(corpus)."""

    def __init__(self, units: Sequence[Unit]):
        self.units = units
        if isinstance(units, UnitTable):  # a loaded index: only the units routing reads are made
            self.superseded = units.superseded
            self.by_id: Mapping[str, Unit] = units.by_id()
            read: Iterable[Unit] = units.routed_units()
        else:
            self.superseded = superseded_ids(units)
            self.by_id = {u.id: u for u in units}
            read = units
        governed: dict[str, list[Unit]] = {}
        owners: dict[tuple[str, str, str], list[Unit]] = {}
        for u in read:
            if u.id in self.superseded:
                continue
            if u.root or u.paths:
                governed.setdefault(u.project, []).append(u)
            if u.subject and u.facet:
                owners.setdefault((u.project, u.subject, u.facet), []).append(u)
        self.root_and_areas = {p: tuple(sorted(us, key=lambda u: u.id)) for p, us in governed.items()}
        self.owners = {k: tuple(sorted(us, key=lambda u: u.id)) for k, us in owners.items()}

    def own(self, uid: str, project: str) -> Unit | None:
        """The unit `uid` when it belongs to `project` and nothing supersedes it."""
        unit = self.by_id.get(uid)
        if unit is None or unit.project != project or uid in self.superseded:
            return None
        return unit


_CORPORA: OrderedDict[int, RoutingCorpus] = OrderedDict()
_CORPORA_SIZE = 4  # as many as selection.memory.store keeps indexes
_corpora_lock = threading.Lock()


def routing_corpus(units: Sequence[Unit]) -> RoutingCorpus:
    """The RoutingCorpus of `units` (an index's immutable tuple), cached by identity."""
    key = id(units)
    with _corpora_lock:
        cached = _CORPORA.get(key)
        if cached is not None and cached.units is units:
            _CORPORA.move_to_end(key)
            return cached
    corpus = RoutingCorpus(units)
    with _corpora_lock:
        _CORPORA[key] = corpus  # holds `units`, so the id cannot be reused while cached
        while len(_CORPORA) > _CORPORA_SIZE:
            _CORPORA.popitem(last=False)
    return corpus


def structural_conflicts(
    units: Sequence[Unit],
    *,
    among: Iterable[str] | None = None,
    standpoint: datetime | None = None,
    extra: Sequence[Unit] = (),
) -> tuple[Conflict, ...]:
    """Active units sharing project, subject and facet with no supersession between them.

    `among` restricts the check to those ids (the units a selection would load; `extra` are units
    outside `units`, such as local overlay units); activity is always judged against the whole
    corpus. Nothing is tie-broken: every member is listed.
    """
    corpus = routing_corpus(units)
    if among is None:
        candidates: Iterable[Unit] = list(units) + list(extra)
    else:
        local = {u.id: u for u in extra}
        candidates = [u for uid in dict.fromkeys(among) if (u := corpus.by_id.get(uid) or local.get(uid))]
    groups: dict[tuple[str, str, str], list[str]] = {}
    for u in candidates:
        if u.subject and u.facet and _active(u, corpus.superseded, standpoint):
            groups.setdefault((u.project, u.subject, u.facet), []).append(u.id)
    return tuple(
        Conflict(ConflictCode.SUBJECT_FACET_CONFLICT.value, tuple(sorted(ids)), *key)
        for key, ids in sorted(groups.items())
        if len(set(ids)) > 1
    )


def route(
    units: Sequence[Unit],
    *,
    project: str,
    policy: RoutingPolicy,
    inputs: RoutingInputs,
    standpoint: datetime | None = None,
    local_units: Sequence[Unit] = (),
) -> RoutingReport:
    """The routing report for one request (the envelope and the dispositions, before budgeting)."""
    inputs = inputs.canonical()
    problems: list[str] = []
    invalid = ambiguous = incomplete = False

    paths: list[str] = []
    for raw in inputs.paths:
        try:
            paths.append(normalise(raw))
        except RoutePathError as error:
            invalid = True
            problems.append(f"path scope: {error}")

    work_type = None
    category = None
    general = False  # the peer's general task on a frame without one: its root units suffice
    if inputs.task_category:
        category, why = resolve_task(policy, inputs.task_category)
        general = why == "general"
        if category is None and why.startswith("unknown: "):
            invalid = True
            problems.append(why.removeprefix("unknown: "))
        elif category is None and not general:
            ambiguous = True
            problems.append(why)
        elif category is None:
            pass
        elif len(category.work_types) > 1:
            ambiguous = True
            problems.append(
                f'task category "{category.name}" maps to {len(category.work_types)} work types '
                f"({', '.join(category.work_types)}); routing does not guess between them"
            )
        elif category.work_types:
            work_type = category.work_types[0]
    elif policy.task_categories:
        incomplete = True
        problems.append("no task category declared; the frame routes by task category")

    corpus = routing_corpus(units)
    modules = dict(policy.modules)

    def resolve(name: str) -> tuple[str, ...]:
        if name in modules:
            return tuple(sorted(uid for uid in modules[name] if corpus.own(uid, project)))
        return (name,) if corpus.own(name, project) else ()

    explicit_ids = {uid: name for name in policy.explicit for uid in resolve(name)}
    # activation kind of each unit, and the module that gave it: only its triggers load the unit
    kinds: dict[str, tuple[str, str]] = {uid: ("explicit-only", name) for uid, name in explicit_ids.items()}
    for name, kind in policy.activation:
        for uid in resolve(name):
            kinds[uid] = (kind, name)

    def admits(uid: str, trigger: str) -> bool:
        kind = kinds.get(uid)
        return kind is None or trigger in ACTIVATION_TRIGGERS.get(kind[0], frozenset())

    def not_admitted(uid: str, what: str) -> str:
        kind, module = kinds[uid]
        return f'{what}, but {module} has activation "{kind}", which does not admit it'

    refused: dict[str, str] = {}  # unit -> why a trigger that fired is not admitted
    overlay_ids: dict[str, str] = {}
    for name in inputs.overlays:
        ids = resolve(name)
        if not ids:
            invalid = True
            problems.append(f'overlay "{name}" names no module or unit of project "{project}"')
        for uid in ids:
            if admits(uid, TRIGGER_EXPLICIT):
                overlay_ids.setdefault(uid, name)
            else:
                refused.setdefault(uid, not_admitted(uid, f'requested by overlay "{name}"'))

    task_ids: dict[str, str] = {}  # loaded by the declared category
    other_task_ids: dict[str, str] = {}  # loaded only by other categories
    missing: list[UnitDisposition] = []
    for cat in policy.task_categories:
        for required, names in ((True, cat.load), (False, cat.load_if_present)):
            for name in names:
                ids = resolve(name)
                if cat is category:
                    for uid in ids:
                        if admits(uid, TRIGGER_TASK):
                            task_ids.setdefault(uid, cat.name)
                        else:
                            refused.setdefault(uid, not_admitted(uid, f'loaded by task category "{cat.name}"'))
                    if not ids:
                        code = RouteCode.MISSING_REQUIRED if required else RouteCode.MISSING_OPTIONAL
                        detail = f'task category "{cat.name}" loads "{name}", which the corpus lacks'
                        missing.append(_disposition(name, code, detail))
                        if required:
                            incomplete = True
                            problems.append(f"required module missing: {detail}")
                else:
                    for uid in ids:
                        if admits(uid, TRIGGER_TASK):
                            other_task_ids.setdefault(uid, cat.name)

    scoped = bool(paths or inputs.overlays)
    needs_scope = category.needs_scope if category is not None else not general
    dispositions: dict[str, UnitDisposition] = {}
    own = {u.id: u for u in corpus.root_and_areas.get(project, ())}
    for uid in (*explicit_ids, *task_ids, *other_task_ids, *overlay_ids, *refused):
        own[uid] = corpus.by_id[uid]
    governed = sorted(own)
    area_skipped_for_scope = False
    for uid in governed:
        unit = own[uid]
        try:
            patterns = [normalise_pattern(p) for p in unit.paths]
        except RoutePathError as error:
            invalid = True
            problems.append(f"unit {uid}: {error}")
            dispositions[uid] = _disposition(uid, RouteCode.ROUTE_INVALID, str(error))
            continue
        if patterns and not admits(uid, TRIGGER_PATH):
            detail = not_admitted(uid, f"routed by paths {', '.join(patterns)}")
            invalid = True
            problems.append(f"unit {uid}: {detail}")
            dispositions[uid] = _disposition(uid, RouteCode.ROUTE_INVALID, detail)
            continue
        hit = next((p for p in paths for pat in patterns if matches(pat, p)), None)
        if unit.root:
            code, detail = RouteCode.ROUTE_ALWAYS, "root constraint: part of the baseline envelope"
        elif uid in task_ids:
            code, detail = RouteCode.ROUTE_TASK, f'loaded by task category "{task_ids[uid]}"'
        elif hit is not None:
            code, detail = RouteCode.ROUTE_PATH, f"path {hit} matches {', '.join(patterns)}"
        elif uid in overlay_ids:
            code, detail = RouteCode.ROUTE_EXPLICIT, f'requested by overlay "{overlay_ids[uid]}"'
        elif uid in refused:
            code, detail = RouteCode.ROUTE_INVALID, refused[uid]
        elif patterns and paths:
            code, detail = RouteCode.SKIP_NO_PATH_MATCH, f"no path in scope matches {', '.join(patterns)}"
        elif patterns and not scoped and needs_scope:
            code, detail = (
                RouteCode.SKIP_SCOPE_MISSING,
                "path-routed area, but the request gave neither a path scope nor an explicit area",
            )
            area_skipped_for_scope = True
        elif patterns:
            code, detail = RouteCode.SKIP_NOT_REQUESTED, "path-routed area not requested"
        elif uid in other_task_ids:
            code = RouteCode.SKIP_TASK_MISMATCH
            detail = (
                f'loaded by task category "{other_task_ids[uid]}", not by "{category.name}"'
                if category is not None
                else f'loaded by task category "{other_task_ids[uid]}"; no category declared'
            )
        else:
            code, detail = RouteCode.SKIP_NOT_REQUESTED, "loaded only when an overlay names it"
        dispositions[uid] = _disposition(uid, code, detail)
    for uid, why in sorted(refused.items()):
        invalid = True  # a trigger the activation does not name: the request or the frame breaks the rules
        problems.append(f"unit {uid}: {why}")
    if area_skipped_for_scope:
        incomplete = True
        problems.append(
            "the project has path-routed areas and the request gave neither a path scope nor an explicit area"
        )
    for entry in missing:
        dispositions.setdefault(entry.unit, entry)

    order = {code: i for i, code in enumerate(LOAD_ORDER)}
    envelope = [
        d.unit
        for d in sorted(
            (d for d in dispositions.values() if d.reason in order),
            key=lambda d: (order[RouteCode(d.reason)], d.unit),
        )
    ]
    local, local_loaded = judge_local(units, local_units, project=project, standpoint=standpoint)
    envelope.extend(local_loaded)
    conflicts = structural_conflicts(units, among=envelope, standpoint=standpoint, extra=local_units)

    if invalid:
        completeness = Completeness.INVALID
    elif ambiguous:
        completeness = Completeness.AMBIGUOUS
    elif incomplete:
        completeness = Completeness.INCOMPLETE
    else:
        completeness = Completeness.COMPLETE
    return RoutingReport(
        inputs=inputs,
        completeness=completeness.value,
        work_type=work_type,
        dispositions=tuple(sorted(dispositions.values(), key=lambda d: d.unit)),
        conflicts=conflicts,
        problems=tuple(problems),
        envelope=tuple(envelope),
        local=local,
        mode=policy.mode,
    )


def judge_local(
    units: Sequence[Unit], local_units: Sequence[Unit], *, project: str, standpoint=None
) -> tuple[tuple[LocalDisposition, ...], list[str]]:
    """Local overlay units add context; they never override or suppress shared memory.

    Rejected: a local unit that reuses a shared id, supersedes a shared unit, or claims the
    subject and facet of an active shared unit (a shared constraint or decision owns it).
    """
    corpus = routing_corpus(units)
    shared = corpus.by_id

    def owner_of(u: Unit) -> str | None:
        if not (u.subject and u.facet):
            return None
        owners = corpus.owners.get((project, u.subject, u.facet), ())
        active = [o.id for o in owners if _active(o, corpus.superseded, standpoint)]
        return active[0] if active else None

    out: list[LocalDisposition] = []
    loaded: list[str] = []
    for u in sorted(local_units, key=lambda u: u.id):
        if u.id in shared:
            out.append(
                LocalDisposition(u.id, LocalCode.LOCAL_OVERRIDES_SHARED.value, f"reuses the id of shared unit {u.id}")
            )
        elif shared_hit := next((old for old in u.supersedes if old in shared), None):
            out.append(
                LocalDisposition(
                    u.id,
                    LocalCode.LOCAL_SUPERSEDES_SHARED.value,
                    f"would supersede shared unit {shared_hit}; only shared memory can",
                )
            )
        elif owner := owner_of(u):
            out.append(
                LocalDisposition(
                    u.id,
                    LocalCode.LOCAL_OVERRIDES_SHARED.value,
                    f"claims subject {u.subject} / facet {u.facet}, owned by shared unit {owner}",
                )
            )
        else:
            out.append(
                LocalDisposition(u.id, LocalCode.LOCAL_ADDED.value, "private context, added after shared memory")
            )
            loaded.append(u.id)
    return tuple(out), loaded


def _disposition(unit: str, code: RouteCode, detail: str) -> UnitDisposition:
    return UnitDisposition(unit, ROUTE_DISPOSITION[code].value, code.value, detail)
