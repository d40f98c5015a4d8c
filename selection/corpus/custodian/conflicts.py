"""The peer's structural conflict findings (MC-CONFLICT-001 ... 010) over a read memory tree.

Identity is the peer's: `Scope + Subject ID + Facet`, each casefolded; entry ids compare
casefolded too. The status is the most severe finding: INVALID over CONFLICT over REVIEW, else
CLEAR; `check --conflicts` exits 1 on CONFLICT or INVALID (`exit_code`). Subject-registry checks
(003, 004, 005, 007 on a missing Subject or Facet, 010) apply to Protocol 0.6+ manifests, which
have a registry; a manifest without a Protocol is checked for owners, overlaps and relations only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from selection.corpus.custodian.entries import FACETS, normalise_alias, normalise_canonical_ref, parse_entry
from selection.corpus.custodian.integrity import integrity_issues
from selection.corpus.custodian.markdown import segments, unclosed_fence

OWNER_CODES = ("DEC", "CON", "DNU", "AREA")


class ConflictStatus(StrEnum):
    CLEAR = "CLEAR"
    REVIEW = "REVIEW"
    CONFLICT = "CONFLICT"
    INVALID = "INVALID"


@dataclass(frozen=True)
class ConflictFinding:
    code: str
    status: ConflictStatus
    message: str
    entry_ids: tuple[str, ...] = ()
    subject_id: str = ""
    facet: str = ""
    scopes: tuple[str, ...] = ()

    def line(self) -> str:
        identity = ""
        if self.subject_id or self.facet or self.scopes:
            identity = (
                f" [Subject: {self.subject_id or '-'}; Facet: {self.facet or '-'}; "
                f"Scope: {', '.join(self.scopes) or '-'}]"
            )
        entries = f" Entries: {', '.join(self.entry_ids)}." if self.entry_ids else ""
        return f"- {self.code} {self.status.value}: {self.message}{identity}{entries}"


@dataclass(frozen=True)
class ConflictResult:
    status: ConflictStatus
    findings: tuple[ConflictFinding, ...]

    @property
    def exit_code(self) -> int:
        return 1 if self.status in (ConflictStatus.CONFLICT, ConflictStatus.INVALID) else 0

    def lines(self) -> list[str]:
        return [f"Conflict status: {self.status.value}", *(f.line() for f in self.findings)]


def _status(findings: list[ConflictFinding]) -> ConflictStatus:
    for status in (ConflictStatus.INVALID, ConflictStatus.CONFLICT, ConflictStatus.REVIEW):
        if any(f.status == status for f in findings):
            return status
    return ConflictStatus.CLEAR


def analyze_conflicts(read, *, matched_areas: tuple[str, ...] = ()) -> ConflictResult:
    """`read`: a MemoryRead (selection.corpus.memory_markdown)."""
    invalid, conflict, review = ConflictStatus.INVALID, ConflictStatus.CONFLICT, ConflictStatus.REVIEW
    findings: list[ConflictFinding] = []
    governed = read.governed
    subjects = {s.subject_id.casefold(): s for s in read.subjects}
    if governed:
        findings += [ConflictFinding("MC-CONFLICT-010", invalid, message) for _line, message in read.subject_problems]
        findings += _subject_findings(read.subjects)
    everything = read.entries  # archive included: ids and relations span it
    if governed:
        for located in everything:
            findings += [
                ConflictFinding("MC-CONFLICT-007", invalid, issue, (located.entry.entry_id,))
                for issue in integrity_issues(located.entry, located.file)
            ]
    live = [e for e in everything if not e.file.startswith("archive/")]
    by_id: dict[str, list] = {}
    for located in everything:
        if located.file != "subjects.md":
            by_id.setdefault(located.entry.entry_id.casefold(), []).append(located)
    for matches in by_id.values():
        if len(matches) > 1:
            ids = tuple(m.entry.entry_id for m in matches)
            findings.append(
                ConflictFinding(
                    "MC-CONFLICT-008", invalid, "Duplicate Entry ID prevents deterministic relation resolution.", ids
                )
            )
    for located in everything:
        entry = located.entry
        for key in ("Supersedes", "Superseded-By", "Exception-To"):
            for target in (v.strip() for v in entry.fields.get(key, "").split(",") if v.strip()):
                if target.casefold() not in by_id and key != "Exception-To":
                    findings.append(
                        ConflictFinding(
                            "MC-CONFLICT-008",
                            invalid,
                            f"Invalid Entry relation: {key} names {target}",
                            (entry.entry_id,),
                        )
                    )
    owners: dict[tuple[str, str, str], list] = {}
    by_subject_facet: dict[tuple[str, str], list] = {}
    for located in live:
        entry = located.entry
        if entry.status != "active":
            continue
        if located.file not in read.canonical:
            findings.append(
                ConflictFinding(
                    "MC-CONFLICT-007",
                    invalid,
                    "Active Entry is outside canonical manifest-authorized storage.",
                    (entry.entry_id,),
                )
            )
            continue
        if located.file.startswith(("rules/", "profiles/")):
            continue
        if entry.peer and entry.type_code not in OWNER_CODES:
            continue
        subject_id, facet, scope = entry.fields.get("Subject", ""), entry.fields.get("Facet", ""), entry.scope
        where = (entry.entry_id,)
        if governed and entry.peer:
            problem = _operand(subject_id, facet, subjects)
            if problem is not None:
                code, message = problem
                findings.append(ConflictFinding(code, invalid, message, where, subject_id, facet, (scope,)))
                continue
        elif not (subject_id and facet):
            continue
        identity = ((scope or "project").casefold(), subject_id.casefold(), facet.casefold())
        owners.setdefault(identity, []).append(entry)
        by_subject_facet.setdefault(identity[1:], []).append(entry)
    active = {e.entry_id.casefold(): e for es in owners.values() for e in es}
    for (scope, subject_id, facet), matches in sorted(owners.items()):
        if len(matches) > 1:
            ids = tuple(sorted(e.entry_id for e in matches))
            findings.append(
                ConflictFinding(
                    "MC-CONFLICT-001",
                    conflict,
                    "Multiple active owners for one structural identity.",
                    ids,
                    subject_id,
                    facet,
                    (scope,),
                )
            )
    for (subject_id, facet), matches in sorted(by_subject_facet.items()):
        project = [e for e in matches if (e.scope or "project").casefold() == "project"]
        areas = [e for e in matches if e.scope.casefold().startswith("area:")]
        for entry in matches:
            target_id = entry.fields.get("Exception-To", "").strip()
            if not target_id:
                continue
            target = active.get(target_id.casefold())
            valid = (
                entry.scope.casefold().startswith("area:")
                and target is not None
                and (target.scope or "project").casefold() == "project"
                and not target.fields.get("Exception-To")
                and target.fields.get("Subject", "").casefold() == subject_id
                and target.fields.get("Facet", "").casefold() == facet
            )
            if not valid:
                findings.append(
                    ConflictFinding(
                        "MC-CONFLICT-006",
                        invalid,
                        "Invalid Exception-To relation.",
                        (entry.entry_id, target_id),
                        subject_id,
                        facet,
                        (entry.scope, "project"),
                    )
                )
        for entry in areas:
            if not entry.fields.get("Exception-To") and project:
                ids = tuple(sorted([entry.entry_id, *(p.entry_id for p in project)]))
                findings.append(
                    ConflictFinding(
                        "MC-CONFLICT-002",
                        review,
                        "Project/area overlap requires explicit exception review.",
                        ids,
                        subject_id,
                        facet,
                        ("project", entry.scope),
                    )
                )
        matched = [e for e in areas if e.scope.split(":", 1)[1] in set(matched_areas)]
        scopes = {e.scope for e in matched}
        if len(scopes) > 1:
            findings.append(
                ConflictFinding(
                    "MC-CONFLICT-009",
                    review,
                    "Matched areas expose overlapping Subject/Facet ownership.",
                    tuple(sorted(e.entry_id for e in matched)),
                    subject_id,
                    facet,
                    tuple(sorted(scopes)),
                )
            )
    findings += _reconciliation_findings(read.reconciliations, set(by_id))
    unique = {(f.code, f.status, f.message, f.entry_ids, f.subject_id, f.facet, f.scopes): f for f in findings}
    ordered = sorted(unique.values(), key=lambda f: (f.code, f.subject_id, f.facet, f.scopes, f.entry_ids, f.message))
    return ConflictResult(_status(ordered), tuple(ordered))


def _operand(subject_id: str, facet: str, subjects: dict) -> tuple[str, str] | None:
    if not subject_id or not facet:
        return "MC-CONFLICT-007", "Managed hard-memory entry lacks Subject or Facet."
    if facet.casefold() not in FACETS:
        return "MC-CONFLICT-007", f"Invalid Facet {facet!r}."
    subject = subjects.get(subject_id.casefold())
    if subject is None or subject.status not in ("active", "merged"):
        return "MC-CONFLICT-005", f"Subject reference {subject_id} is missing or inactive."
    if subject.status == "merged":
        return "MC-CONFLICT-008", f"Merged Subject {subject_id} is still referenced as an active identity."
    return None


def _subject_findings(records) -> list[ConflictFinding]:
    findings: list[ConflictFinding] = []
    refs: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for subject in records:
        if subject.status != "active":
            continue
        key = subject.subject_id.casefold()
        for alias in (subject.title, *subject.aliases):
            owner = aliases.setdefault(normalise_alias(alias), key)
            if owner != key:
                findings.append(
                    ConflictFinding(
                        "MC-CONFLICT-004",
                        ConflictStatus.CONFLICT,
                        f"Alias {alias!r} is owned by multiple active Subjects.",
                        subject_id=subject.subject_id,
                    )
                )
        if subject.canonical_ref:
            try:
                ref = normalise_canonical_ref(subject.canonical_ref)
            except ValueError as error:
                findings.append(
                    ConflictFinding(
                        "MC-CONFLICT-003", ConflictStatus.INVALID, str(error), subject_id=subject.subject_id
                    )
                )
                continue
            owner = refs.setdefault(ref, key)
            if owner != key:
                findings.append(
                    ConflictFinding(
                        "MC-CONFLICT-003",
                        ConflictStatus.CONFLICT,
                        f"Canonical-Ref {ref!r} is owned by multiple active Subjects.",
                        subject_id=subject.subject_id,
                    )
                )
    return findings


def _reconciliation_findings(text: str, entry_ids: set[str]) -> list[ConflictFinding]:
    """reconciliations.md: each record names two or more existing entries, once."""
    if not text:
        return []

    def finding(message: str, ids: tuple[str, ...] = ()) -> ConflictFinding:
        return ConflictFinding(
            "MC-CONFLICT-008", ConflictStatus.INVALID, f"Invalid or inconsistent reconciliation record: {message}", ids
        )

    opened = unclosed_fence(text)
    if opened is not None:
        return [finding(f"Unclosed fenced code block in reconciliations.md (line {opened})")]
    out: list[ConflictFinding] = []
    seen_ids: set[str] = set()
    seen_sets: dict[frozenset[str], str] = {}
    for segment in segments(text)[1:]:
        record = parse_entry(segment.raw, segment.number)
        if record is None:
            out.append(finding(f'"{segment.heading}" is not a record (## MC-REC-... — title)'))
            continue
        named = tuple(record.lists.get("Entries", ()))
        if record.entry_id.casefold() in seen_ids:
            out.append(finding(f"{record.entry_id} is recorded twice", named))
        seen_ids.add(record.entry_id.casefold())
        if len(named) < 2:
            out.append(finding(f"{record.entry_id} names fewer than two entries", named))
        missing = [n for n in named if n.casefold() not in entry_ids]
        if missing:
            out.append(finding(f"{record.entry_id} names {', '.join(missing)}, which no entry holds", named))
        key = frozenset(n.casefold() for n in named)
        if key in seen_sets:
            out.append(finding(f"{record.entry_id} reconciles the entries {seen_sets[key]} already reconciles", named))
        seen_sets.setdefault(key, record.entry_id)
    return out
