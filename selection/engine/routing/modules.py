"""The module view of a routing report, as MemoryCustodian reports it: one row per module file of
the request's route, in the peer's order, with its `MC-*` reasons, details and disposition.

The order: the declared task's modules (its `load`, then its `load_if_present`, as the manifest
lists them; the Always-load modules lead every task's list), then every optional module the
manifest indexes (rules, profiles, areas) by module id, then the explicit requests that name no
indexed module (missing-optional). Budgets are not decided here (custodian_output.py packs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..types import Unit
from .codes import RouteCode, RouteDisposition
from .custodian import (
    EXPLICIT_BY_KIND,
    McCode,
    mc_code,
    module_kind,
    resolve_task,
)
from .globs import RoutePathError, matches, normalise, normalise_pattern
from .types import RoutingInputs, RoutingPolicy, RoutingReport


@dataclass(frozen=True)
class ModuleRoute:
    module_id: str  # the module file under the memory directory: "areas/backend.md"
    required: bool
    reasons: tuple[McCode, ...]
    disposition: str  # RouteDisposition value
    details: tuple[str, ...] = ()
    units: tuple[str, ...] = ()  # the product's unit ids of the module

    @property
    def loaded(self) -> bool:
        return self.disposition == RouteDisposition.LOADED


def _file(name: str) -> str:
    return name if name.endswith(".md") else f"{name}.md"


def _path_details(patterns: Sequence[str], paths: Sequence[str]) -> tuple[str, ...]:
    """ "cli/a.py <- cli/**" for each path of the scope and each pattern it matches."""
    out = []
    for path in paths:
        for pattern in patterns:
            try:
                if matches(normalise_pattern(pattern), normalise(path)):
                    out.append(f"{normalise(path)} <- {pattern}")
            except RoutePathError:
                continue
    return tuple(dict.fromkeys(out))


def module_routes(
    report: RoutingReport,
    policy: RoutingPolicy,
    units: Mapping[str, Unit],
    *,
    missing_explicit: Sequence[tuple[str, str]] = (),
) -> tuple[ModuleRoute, ...]:
    """The module rows of one request. `missing_explicit`: (kind folder, slug) the request asked for
    by name that the manifest does not index ("areas", "storage")."""
    inputs: RoutingInputs = report.inputs
    modules = dict(policy.modules)
    activation = dict(policy.activation)
    paths = inputs.paths
    order: list[tuple[str, bool]] = []
    category, _ = resolve_task(policy, inputs.task_category) if inputs.task_category else (None, "")
    if category is not None:
        order.extend((name, True) for name in category.load)
        order.extend((name, False) for name in category.load_if_present)
    else:  # the general task, or none: the root modules
        roots = [name for name, ids in sorted(modules.items()) if ids and all(units[i].root for i in ids if i in units)]
        order.extend((name, True) for name in roots)
    optional = sorted(set(activation) | set(policy.explicit), key=_file)
    seen: set[str] = set()
    rows: list[ModuleRoute] = []
    for name, required in [*order, *((n, False) for n in optional)]:
        if name in seen:
            continue
        seen.add(name)
        rows.append(_row(name, required, report, modules.get(name, ()), units, activation.get(name), paths))
    for kind, slug in missing_explicit:
        code = EXPLICIT_BY_KIND[kind]
        rows.append(
            ModuleRoute(f"{kind}/{slug}.md", False, (code, McCode.MISSING_OPTIONAL), RouteDisposition.MISSING_OPTIONAL)
        )
    return tuple(rows)


def _row(name, required, report, ids, units, kind_of, paths) -> ModuleRoute:
    module_id = _file(name)
    present = tuple(uid for uid in ids if uid in units)
    if not present:
        found = report.disposition(name)
        required = required or (found is not None and found.reason == RouteCode.MISSING_REQUIRED)
        code = McCode.MISSING_REQUIRED if required else McCode.MISSING_OPTIONAL
        disposition = RouteDisposition.MISSING_REQUIRED if required else RouteDisposition.MISSING_OPTIONAL
        # a module the task names keeps its task reason; the missing one is the primary reason
        reasons = (McCode.TASK, code) if kind_of is None else (code,)
        return ModuleRoute(module_id, required, reasons, disposition)
    found = [d for uid in present if (d := report.disposition(uid)) is not None]
    invalid = [d for d in found if d.disposition == RouteDisposition.INVALID]
    loaded = [d for d in found if d.disposition == RouteDisposition.LOADED]
    patterns = tuple(dict.fromkeys(p for uid in present for p in units[uid].paths))
    if invalid:
        details = tuple(dict.fromkeys(d.detail for d in invalid if d.detail))
        return ModuleRoute(module_id, required, (McCode.INVALID,), RouteDisposition.INVALID, details, present)
    if loaded or not found:  # a module routing does not govern is what its task loads
        reasons = tuple(dict.fromkeys(mc_code(d.reason, module_id) for d in loaded)) or (McCode.TASK,)
        details = _path_details(patterns, paths) if McCode.PATH in reasons else ()
        return ModuleRoute(module_id, required, reasons, RouteDisposition.LOADED, details, present)
    kind = module_kind(module_id)
    activation = kind_of or "explicit-only"
    if kind == "rules" and "task" in activation:
        reason = McCode.TASK_MISMATCH
    elif kind == "areas" and "path" in activation:
        reason = McCode.SCOPE_MISSING if not paths else McCode.NO_PATH_MATCH
    else:
        reason = McCode.NOT_REQUESTED
    return ModuleRoute(module_id, required, (reason,), RouteDisposition.SKIPPED, (), present)
