"""The peer's read, rendered: its explain text and its JSON envelope (custodian_output.py builds it).

The text is what `context_sha256` hashes, so its every line follows the peer's order: the request,
the completeness, the local overlay, the modules by disposition, the policy exclusions and
completeness dimensions (explain), the budget omissions, the conflicts, the warnings, the verdict,
then each loaded module's packed text.
"""

from __future__ import annotations

from io import StringIO

from .custodian import McCode, module_budget, module_slug, primary_reason
from .custodian_output import OUTPUT_SCHEMA_VERSION, CustodianRead, context_sha256, normalise_text

_GROUPS = (
    ("Loaded", "loaded"),
    ("Skipped optional", "skipped"),
    ("Missing required", "missing-required"),
    ("Missing optional", "missing-optional"),
    ("Invalid", "invalid"),
)
_MATCHING = (
    (McCode.TASK, "task"),
    (McCode.EXPLICIT_RULE, "rule"),
    (McCode.EXPLICIT_PROFILE, "profile"),
    (McCode.EXPLICIT_AREA, "area"),
)


def render_text(read: CustodianRead, *, explain: bool = False, names_only: bool = False) -> str:
    out = StringIO()

    def line(text: str = "") -> None:
        out.write(text + "\n")

    line("# Memory Context Pack")
    line(f"Task: {read.supplied_task}")
    line(f"Canonical task: {read.canonical_task}")
    line("Paths:")
    for path, missing in read.paths or (("none supplied", False),):
        line(f"- {path}{' (missing-on-disk)' if missing else ''}")
    line("Explicit scope:")
    for value in read.explicit or ("none supplied",):
        line(f"- {value}")
    line(f"Routing completeness: {read.completeness}")
    line(f"Local overlay status: {'BOUND' if read.local else 'DISABLED'}")
    if read.local:
        line("Local loaded:")
        for name, _ in read.local:
            line(f"- {name}")
            if explain:
                line("  Precedence: below shared constraints, tombstones, decisions, and rules")
    for heading, disposition in _GROUPS:
        rows = [m for m in read.modules if m.disposition == disposition]
        line(f"{heading}:")
        if not rows:
            line("- none")
        for row in rows:
            line(f"- {row.module_id}")
            if not explain:
                continue
            reasons = row.reasons + ((McCode.OMIT_BUDGET,) if read.omitted.get(row.module_id) else ())
            line(f"  Disposition: {row.disposition}")
            line(f"  Reason: {primary_reason(reasons, row.details)}")
            for code, word in _MATCHING:
                if code in row.reasons:
                    value = read.canonical_task if word == "task" else module_slug(row.module_id)
                    line(f"  Matching input: {word}:{value}")
                    break
    if explain:
        line("Policy exclusions:")
        line("- inbox.md: candidate/maintenance-only; excluded from normal task context")
        line("- archive/: explicit maintenance only; archive files were not enumerated")
        line("Incomplete dimensions:")
        for dimension in read.dimensions or ("none",):
            line(f"- {dimension}")
    line("Budget omissions:")
    for module_id, ref in read.omissions:
        line(f"- {ref}")
        if explain:
            line(f"  Module: {module_id}")
            line("  Disposition: omitted-by-budget")
            line(f"  Reason: {McCode.OMIT_BUDGET.value}")
    if not read.omissions:
        line("- none")
    if read.oversized:
        line("Oversized atomic entries:")
        for module_id in read.oversized:
            line(
                f"- {module_id}: one atomic entry exceeds the {module_budget(module_id)}-token budget "
                "and was included whole"
            )
    line(f"Conflict status: {read.conflict_status}")
    for code, subject, facet, entries in read.conflicts:
        line(
            f"- {code} CONFLICT: more than one active entry owns this Subject and Facet "
            f"[Subject: {subject or '-'}; Facet: {facet or '-'}; Scope: project] Entries: {', '.join(entries)}."
        )
    if read.warnings:
        line("Warnings:")
        for warning in read.warnings:
            line(f"- {warning}")
    if read.strict and read.rejected:
        line("Context pack not approved for substantial work")
    elif read.completeness != "INVALID" and read.conflicts:
        line("Context pack contains unresolved active-memory conflict")
    if not names_only:
        for name, text in read.contents:
            line(f"\n## {name}\n")
            line(text)
        if not (read.strict and read.rejected):
            for name, text in read.local:
                line(f"\n## {name}\n")
                line(text)
    return normalise_text(out.getvalue())


def _finding(code: str, severity: str, message: str, entry_id: str | None = None) -> dict:
    return {
        "code": code,
        "entry_id": entry_id,
        "message": message,
        "path": "docs/memory",
        "remediation": "Review the referenced managed-memory source and run audit again.",
        "severity": severity,
    }


def render_json(read: CustodianRead, *, text: str, protocol_version: str | None = None) -> dict:
    """The peer's public envelope for `read`: status and exit class follow from the findings, and
    the findings agree with the exit code."""
    findings = [_finding("MC-ROUTING-WARNING", "WARNING", w) for w in read.warnings]
    for code, subject, facet, entries in read.conflicts:
        message = f"More than one active entry owns Subject {subject} and Facet {facet}: {', '.join(entries)}."
        findings.append(_finding(code, "BLOCKER" if read.exit_code == 2 else "ERROR", message))
    severe = {f["severity"] for f in findings}
    if read.exit_code == 2 and "BLOCKER" not in severe:
        findings.append(_finding("MC-COMMAND-002", "BLOCKER", "read reported a blocker."))
    elif read.exit_code == 1 and not severe & {"ERROR", "BLOCKER"}:
        findings.append(_finding("MC-COMMAND-001", "ERROR", "read reported a domain failure."))
    order = ("INFO", "WARNING", "ERROR", "BLOCKER")
    findings.sort(key=lambda f: (order.index(f["severity"]), f["code"], f["path"], f["entry_id"] or "", f["message"]))
    severities = {f["severity"] for f in findings}
    status = "FAIL" if severities & {"ERROR", "BLOCKER"} else "REVIEW" if "WARNING" in severities else "PASS"
    exit_class = {2: "blocker", 1: "domain-failure"}.get(
        read.exit_code, "success-with-review" if status == "REVIEW" else "success"
    )
    data = {
        "task": read.supplied_task,
        "canonical_task": read.canonical_task,
        "paths": [{"path": p, "missing_on_disk": m} for p, m in read.paths],
        "explicit_scope": list(read.explicit),
        "routing_completeness": read.completeness,
        "routing_policy": read.mode,
        "strict_routing": read.strict,
        "approved": not read.rejected,
        "loaded_modules": [m.module_id for m in read.modules if m.loaded],
        "module_dispositions": [
            {
                "module_id": m.module_id,
                "required": m.required,
                "loaded": m.loaded,
                "disposition": m.disposition,
                "reasons": [r.value for r in m.reasons]
                + ([McCode.OMIT_BUDGET.value] if read.omitted.get(m.module_id) else []),
                "details": list(m.details),
                "omitted_entries": read.omitted.get(m.module_id, 0),
                "oversized": m.module_id in read.oversized,
            }
            for m in sorted(read.modules, key=lambda m: m.module_id.casefold())
        ],
        "loaded_entry_ids": list(read.loaded_entry_ids),
        "subject_ids": list(read.subject_ids),
        "budget_omissions": [
            {"module_id": mid, "unit_ref": ref, "disposition": "omitted-by-budget", "reason": McCode.OMIT_BUDGET.value}
            for mid, ref in read.omissions
        ],
        "incomplete_dimensions": list(read.dimensions),
        "conflict_status": read.conflict_status,
        "local_overlay_status": "BOUND" if read.local else "DISABLED",
        "rendered_context": text,
        "rendered_text": text,
        "context_sha256": context_sha256(text),
    }
    return {
        "output_schema_version": OUTPUT_SCHEMA_VERSION,
        "command": "read",
        "protocol_version": protocol_version,
        "status": status,
        "exit_class": exit_class,
        "data": data,
        "findings": findings,
        "disclaimers": [],
    }
