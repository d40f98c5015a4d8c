"""MemoryCustodian's read output from a routing report: its module packing under per-module
budgets, its explain text (`select --format mc-text`) and its JSON envelope (`--format mc-json`),
with `context_sha256` computed the way the peer computes it (UTF-8, LF, a final newline).

Pure: the caller passes the report, the frame's policy, the units, and (when it has them) the
module files' text; without them a module's text is rebuilt from its units.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..types import Unit
from .codes import Completeness, RouteDisposition
from .custodian import (
    DIMENSION_AMBIGUOUS,
    DIMENSION_INVALID,
    DIMENSION_REQUIRED,
    DIMENSION_SCOPE,
    EXPLICIT_KINDS,
    SUBSTANTIAL_TASKS,
    McCode,
    estimate_mc_tokens,
    exit_code,
    module_budget,
    strict_rejected,
    task_interpretations,
)
from .modules import ModuleRoute, module_routes
from .types import RoutingPolicy, RoutingReport

OUTPUT_SCHEMA_VERSION = 1
_EXPLICIT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_ENTRY_REF = re.compile(r"\bMC-(?:DEC|CON|DNU|PREF|AREA|INBOX|TOMB)-\d{8}-[0-9a-f]{8}\b", re.IGNORECASE)
_ENTRY_HEADING = re.compile(r"^## +(\S+) +— ")
_SUBJECT_LINE = re.compile(r"(?m)^Subject: *(\S+)")
SCOPE_WARNING = "Enabled path-routed areas were not evaluated because no paths or explicit areas were supplied."
CONFLICT_CODE = "MC-CONFLICT-001"  # two active entries own one Subject and Facet


class ExplicitNameError(ValueError):
    """An explicit --rule/--profile/--area name the peer refuses (INVALID, exit 2)."""


def explicit_overlays(
    policy: RoutingPolicy, requested: Mapping[str, Sequence[str]]
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """--rule/--profile/--area short slugs -> (the overlays routing gets, the (folder, slug) pairs
    the manifest does not index). `requested`: {"rule": [...], "profile": [...], "area": [...]}.
    A slug of a module whose activation admits no explicit trigger is not an overlay: the module
    keeps its own skip reason, as the peer routes it."""
    activation = dict(policy.activation)
    indexed = set(activation) | set(policy.explicit)
    overlays: list[str] = []
    missing: list[tuple[str, str]] = []
    for word, kind in EXPLICIT_KINDS.items():
        for raw in sorted(dict.fromkeys(v.strip() for v in requested.get(word, ()))):
            if not _EXPLICIT_NAME.fullmatch(raw):
                raise ExplicitNameError(f"Invalid explicit module name: {raw}")
            name = f"{kind}/{raw}"
            if name not in indexed:
                missing.append((kind, raw))
            elif "explicit" in activation.get(name, "explicit-only"):
                overlays.append(name)
    return tuple(overlays), tuple(missing)


@dataclass(frozen=True)
class _Unit:  # one markdown unit of a module file: its preamble, an H2 entry, a bullet or a body
    kind: str
    text: str


def _parse(text: str) -> tuple[str, list[_Unit]]:
    lines = text.rstrip().splitlines()
    title = lines[0] if lines and lines[0].startswith("# ") else ""
    start = 1 if title else 0
    for marker, kind in ((lambda s: s.startswith("## "), "h2"), (lambda s: s.startswith(("- ", "* ", "+ ")), "bullet")):
        starts = [i for i in range(start, len(lines)) if marker(lines[i])]
        if starts:
            units = []
            preamble = "\n".join(lines[start : starts[0]]).strip()
            if preamble:
                units.append(_Unit("preamble", preamble))
            for n, at in enumerate(starts):
                end = starts[n + 1] if n + 1 < len(starts) else len(lines)
                units.append(_Unit(kind, "\n".join(lines[at:end]).strip()))
            return title, units
    body = "\n".join(lines[start:]).strip()
    return title, [_Unit("body", body)] if body else []


def _render(title: str, units: Sequence[_Unit]) -> str:
    parts = ([title] if title else []) + [u.text for u in units if u.text.strip()]
    text = "\n\n".join(parts)
    return text if text.endswith("\n") else text + "\n"


def pack_module(module_id: str, text: str) -> tuple[str, tuple[str, ...], bool]:
    """(packed text, refs of the entries the module budget omits, oversized): whole entries in file
    order while they fit; a first entry larger than the budget is included whole (oversized)."""
    normalized = text.strip()
    budget = module_budget(module_id)
    if budget is None or estimate_mc_tokens(normalized) <= budget:
        return normalized, (), False
    title, units = _parse(normalized)
    chosen: list[_Unit] = []
    oversized, stop = False, len(units)
    for index, unit in enumerate(units):
        if estimate_mc_tokens(_render(title, [*chosen, unit]).strip()) <= budget:
            chosen.append(unit)
            continue
        first_entry = unit.kind != "preamble" and not any(u.kind != "preamble" for u in chosen)
        if not chosen or first_entry:
            chosen.append(unit)
            oversized, stop = True, index + 1
        else:
            stop = index
        break
    refs = tuple(_entry_ref(module_id, u, i) for i, u in enumerate(units[stop:], start=stop) if u.kind != "preamble")
    return _render(title, chosen).strip(), refs, oversized


def _entry_ref(module_id: str, unit: _Unit, index: int) -> str:
    found = _ENTRY_REF.search(unit.text.splitlines()[0] if unit.text else "")
    return found.group(0) if found else f"{module_id}#unit-{index + 1}"


def module_text(ids: Sequence[str], units: Mapping[str, Unit]) -> str:
    """A module's text rebuilt from its units, when the module file itself is not at hand."""
    return "\n\n".join(f"## {units[i].title}\n\n{units[i].text}" if units[i].title else units[i].text for i in ids)


def context_sha256(text: str) -> str:
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


def normalise_text(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text + "\n" if text and not text.endswith("\n") else text


@dataclass(frozen=True)
class CustodianRead:
    """One read, in the peer's terms: what its text and its JSON both render."""

    supplied_task: str
    canonical_task: str
    paths: tuple[tuple[str, bool], ...]  # (path, missing on disk)
    explicit: tuple[str, ...]  # "rule:output", "area:backend", ...
    completeness: str
    mode: str
    modules: tuple[ModuleRoute, ...]
    contents: tuple[tuple[str, str], ...]
    omissions: tuple[tuple[str, str], ...]  # (module id, entry ref)
    omitted: Mapping[str, int] = field(default_factory=dict)
    oversized: tuple[str, ...] = ()
    dimensions: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    conflicts: tuple[tuple[str, str, str, tuple[str, ...]], ...] = ()  # (code, subject, facet, entries)
    local: tuple[tuple[str, str], ...] = ()
    strict: bool = False
    rejected: bool = False
    exit_code: int = 0
    loaded_entry_ids: tuple[str, ...] = ()
    subject_ids: tuple[str, ...] = ()

    @property
    def conflict_status(self) -> str:
        return "CONFLICT" if self.conflicts else "CLEAR"


def custodian_read(
    report: RoutingReport,
    policy: RoutingPolicy,
    units: Mapping[str, Unit],
    *,
    supplied_task: str,
    explicit: Mapping[str, Sequence[str]] | None = None,
    missing_explicit: Sequence[tuple[str, str]] = (),
    module_texts: Mapping[str, str] | None = None,
    project_root: Path | None = None,
    local_units: Sequence[Unit] = (),
) -> CustodianRead:
    """The peer's read of one routed request (the routing report of the product's selection)."""
    if report.completeness == Completeness.INVALID:
        # the peer refuses an invalid request or manifest as a whole: one invalid row, no context
        details = tuple(report.problems)
        modules: tuple[ModuleRoute, ...] = (
            ModuleRoute("manifest.md", True, (McCode.INVALID,), RouteDisposition.INVALID, details),
        )
    else:
        modules = module_routes(report, policy, units, missing_explicit=missing_explicit)
    readings = task_interpretations(supplied_task)
    canonical = readings[0] if len(readings) == 1 else ("|".join(readings) or "<invalid>")
    paths = tuple((p, project_root is not None and not (project_root / p).exists()) for p in report.inputs.paths)
    requested = {k: tuple(sorted(dict.fromkeys(v))) for k, v in (explicit or {}).items()}
    scope = tuple(f"{word}:{slug}" for word in EXPLICIT_KINDS for slug in requested.get(word, ()))
    contents, omissions, omitted, oversized = [], [], {}, []
    entry_ids: list[str] = []
    for row in modules:
        if not row.loaded:
            continue
        text = (module_texts or {}).get(row.module_id)
        if text is None:
            text = module_text(row.units, units)
        packed, refs, big = pack_module(row.module_id, text)
        contents.append((row.module_id, packed))
        omissions.extend((row.module_id, ref) for ref in refs)
        if refs:
            omitted[row.module_id] = len(refs)
        if big:
            oversized.append(row.module_id)
        entry_ids.extend(m.group(1) for line in packed.splitlines() if (m := _ENTRY_HEADING.match(line)))
    by_lower = {uid.casefold(): u for uid, u in units.items()}
    subjects = {m for _, text in contents for m in _SUBJECT_LINE.findall(text)}
    # a unit's stored subject may be casefolded: the spelling in the module text wins
    written = {s.casefold() for s in subjects}
    subjects |= {
        name
        for e in entry_ids
        if (u := by_lower.get(e.casefold()))
        and u.subject
        and (name := u.subject.rsplit("/", 1)[-1]).casefold() not in written
    }

    warnings = [f"Explicit {kind[:-1]} {slug!r} is not enabled in the manifest." for kind, slug in missing_explicit]
    dimensions = []
    path_areas = [m for m in modules if m.module_id.startswith("areas/") and m.reasons[0] is McCode.SCOPE_MISSING]
    if canonical in SUBSTANTIAL_TASKS and path_areas and not report.inputs.paths and not requested.get("area"):
        dimensions.append(DIMENSION_SCOPE)
        warnings.append(SCOPE_WARNING)
    if any(m.disposition == RouteDisposition.MISSING_REQUIRED for m in modules):
        dimensions.append(DIMENSION_REQUIRED)
        warnings.append("One or more required routed modules are missing.")
    if report.completeness == Completeness.INVALID:
        completeness = Completeness.INVALID
        dimensions.append(DIMENSION_INVALID)
        warnings = [f"Routing input or manifest is invalid: {'; '.join(report.problems)}"]
    elif report.completeness == Completeness.AMBIGUOUS:
        completeness = Completeness.AMBIGUOUS
        dimensions.append(DIMENSION_AMBIGUOUS)
        warnings.extend(f"{McCode.AMBIGUOUS.value}: {p}" for p in report.problems)
    else:
        completeness = Completeness.INCOMPLETE if dimensions else Completeness.COMPLETE
    conflicts = tuple(
        (CONFLICT_CODE, c.subject, c.facet, tuple(units[u].title.split(" — ")[0] if u in units else u for u in c.units))
        for c in report.conflicts
    )
    status = "CONFLICT" if conflicts else "CLEAR"
    strict = report.inputs.strict
    local = tuple((f"local/{u.id}", u.text.strip()) for u in local_units if u.id in set(report.envelope))
    return CustodianRead(
        supplied_task=supplied_task,
        canonical_task=canonical,
        paths=paths,
        explicit=scope,
        completeness=completeness.value,
        mode=report.mode,
        modules=modules,
        contents=tuple(contents),
        omissions=tuple(omissions),
        omitted=omitted,
        oversized=tuple(oversized),
        dimensions=tuple(dict.fromkeys(dimensions)),
        warnings=tuple(warnings),
        conflicts=conflicts,
        local=local,
        strict=strict,
        rejected=strict and strict_rejected(completeness, status, canonical),
        exit_code=exit_code(completeness, status, strict=strict, task=canonical),
        loaded_entry_ids=tuple(entry_ids),
        subject_ids=tuple(sorted(subjects)),
    )
