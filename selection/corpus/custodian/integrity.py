"""The declared structure of one formal entry, as the peer's integrity pass checks it (MC-CONFLICT-007).

A formal entry (a peer id, `MC-<TYPE>-YYYYMMDD-8hex`) declares exactly one `Status`, `Scope` and
`Evidence`, no field twice, exactly one typed body of the kind its id (or its `Entry-Type`, or its
storage for an area entry) requires and no other, lifecycle fields its status allows, and a
`Candidate-Type` exactly when it is a candidate or a promoted one.
"""

from __future__ import annotations

from selection.corpus.custodian.entries import Entry

TYPED_BODIES = frozenset({"Decision", "Constraint", "Rejected", "Preference", "Rule", "Profile", "Statement"})
LIFECYCLE = ("Supersedes", "Superseded-By", "Promoted-From", "Promoted-To")
_BY_CODE = {"DEC": "Decision", "CON": "Constraint", "DNU": "Rejected", "TOMB": "Rejected", "PREF": "Preference"}


def expected_body(entry: Entry, path: str) -> str | None:
    code = entry.type_code
    if code in _BY_CODE:
        return _BY_CODE[code]
    if code == "INBOX":
        return "Statement"
    if code == "AREA":
        declared = entry.fields.get("Entry-Type", "").strip().lower()
        if declared:
            return declared.capitalize()
        if path.startswith("rules/"):
            return "Rule"
        if path.startswith("profiles/"):
            return "Profile"
        return "Decision"
    return None


def integrity_issues(entry: Entry, path: str) -> list[str]:
    """The peer's structural issues of one formal entry (none for a non-peer id)."""
    if not entry.peer or entry.type_code in ("SUBJ", "REC"):
        return []
    prefix = f"{path}: {entry.entry_id}"
    issues = []
    for name in ("Status", "Scope", "Evidence"):
        count = entry.counts.get(name, 0)
        if count != 1:
            issues.append(f"{prefix} must declare exactly one {name} field (found {count})")
    issues += [f"{prefix} has duplicate {name} fields" for name, count in sorted(entry.counts.items()) if count > 1]
    body = expected_body(entry, path)
    if body is not None:
        count = entry.counts.get(body, 0)
        if count != 1:
            issues.append(f"{prefix} must declare exactly one {body} typed body (found {count})")
        for other in sorted(TYPED_BODIES - {body}):
            if entry.counts.get(other):
                issues.append(f"{prefix} uses {other} body but its Entry ID/storage requires {body}")
    status = entry.status
    superseded_by, promoted_to = bool(entry.fields.get("Superseded-By")), bool(entry.fields.get("Promoted-To"))
    if superseded_by and promoted_to:
        issues.append(f"{prefix} cannot declare both Superseded-By and Promoted-To")
    if status == "active" and (superseded_by or promoted_to):
        issues.append(f"{prefix} active lifecycle conflicts with terminal relation fields")
    if status == "candidate" and any(entry.fields.get(name) for name in LIFECYCLE):
        issues.append(f"{prefix} candidate lifecycle cannot declare transition relations")
    if status == "superseded" and promoted_to:
        issues.append(f"{prefix} superseded lifecycle cannot declare Promoted-To")
    if status == "promoted" and superseded_by:
        issues.append(f"{prefix} promoted lifecycle cannot declare Superseded-By")
    candidate_types = entry.counts.get("Candidate-Type", 0)
    if status in ("candidate", "promoted") and candidate_types != 1:
        issues.append(f"{prefix} must declare exactly one Candidate-Type field (found {candidate_types})")
    elif status not in ("candidate", "promoted") and candidate_types:
        issues.append(f"{prefix} non-candidate lifecycle cannot declare Candidate-Type")
    return issues
