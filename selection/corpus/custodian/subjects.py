"""subjects.md, the Subject registry: stable Subject ids, their Canonical-Ref and aliases.

The registry is metadata, never context: its entries become no units. `read_subjects` returns the
subjects and the registry's own problems (the peer reports those as MC-CONFLICT-010).
"""

from __future__ import annotations

from dataclasses import dataclass

from selection.corpus.custodian.entries import Entry, parse_entry
from selection.corpus.custodian.markdown import segments, unclosed_fence

SUBJECT_STATUSES = ("active", "merged", "superseded")
SUBJECT_FIELDS = frozenset(
    {"Status", "Kind", "Canonical-Ref", "Evidence", "Aliases", "Merged-Into", "Supersedes", "Superseded-By"}
)


@dataclass(frozen=True)
class Subject:
    subject_id: str  # case kept
    title: str
    status: str
    kind: str
    canonical_ref: str
    aliases: tuple[str, ...]
    line: int
    merged_into: str = ""


def read_subjects(text: str, file: str = "subjects.md") -> tuple[list[Subject], list[tuple[int | None, str]]]:
    subjects: list[Subject] = []
    problems: list[tuple[int | None, str]] = []
    opened = unclosed_fence(text)
    if opened is not None:
        return [], [(opened, f"Unclosed fenced code block in {file} (line {opened})")]
    for segment in segments(text)[1:]:
        entry: Entry | None = parse_entry(segment.raw, segment.number)
        if entry is None or not entry.entry_id.upper().startswith("MC-SUBJ-"):
            problems.append((segment.number, f'{file}: "{segment.heading}" is not a Subject (## MC-SUBJ-... — title)'))
            continue
        problems.extend(entry.problems)
        for key in sorted(set(entry.counts) - SUBJECT_FIELDS):
            problems.append((segment.number, f"{entry.entry_id} has an unknown Subject field {key}"))
        status = entry.status
        if status not in SUBJECT_STATUSES:
            problems.append((segment.number, f"{entry.entry_id} has Subject status {status!r}"))
        if not entry.fields.get("Kind"):
            problems.append((segment.number, f"{entry.entry_id} must declare a Kind"))
        if not entry.evidence:
            problems.append((segment.number, f"{entry.entry_id} must declare at least one Evidence item"))
        subjects.append(
            Subject(
                subject_id=entry.entry_id,
                title=entry.title,
                status=status,
                kind=entry.fields.get("Kind", ""),
                canonical_ref=entry.fields.get("Canonical-Ref", ""),
                aliases=tuple(entry.lists.get("Aliases", ())),
                line=segment.number,
                merged_into=entry.fields.get("Merged-Into", ""),
            )
        )
    seen: dict[str, int] = {}
    for subject in subjects:
        key = subject.subject_id.casefold()
        if key in seen:
            problems.append((subject.line, f"Subject id {subject.subject_id} is already used at line {seen[key]}"))
        seen.setdefault(key, subject.line)
    return subjects, problems
