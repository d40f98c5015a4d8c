"""What a reader may see of another project's units: their id, project and class, never their text.

A trace of one project can hold units of another (a widened scope, a candidate the scope rule
refused). Unit text reaches a reader only through a stored bundle (item text, rendered text) and
supersession notes (which name units by title, in the bundle and in the trace's coalescing steps);
everything else a page, export or API shows of a unit is its id, project and class. This module is
the one place that hides the text: `selectors.trace_read` / `trace_explained` apply
`redacted_result` for the requesting user, and every page, export, API route and MCP tool reads a
trace through them. A unit whose project is unknown counts as unreadable (fail closed).
"""

from __future__ import annotations

from dataclasses import replace

from authority import access
from selection.engine.outputs import BundleItem, SelectionResult
from selection.engine.reason_codes import CoalescingKind
from selection.engine.render import render_item
from selection.models import Project

REDACTED = "[redacted: you hold no role in project {project}]"


def readable_slugs(user) -> frozenset[str]:
    """The project slugs `user` holds a role in (a superuser: all), as redaction takes them."""
    return frozenset(access.readable_projects(user, Project.objects.all()).values_list("slug", flat=True))


def redacted_item(item: BundleItem) -> BundleItem:
    note = REDACTED.format(project=item.project)
    rendered = render_item(sources=item.sources, evidence_class=item.evidence_class, title="", text=note)
    return replace(item, text=note, rendered=rendered, notes=())


def _id_note(unit_id: str, target_id: str | None) -> str:
    return f"{unit_id}, superseded by {target_id}"


def redacted_result(result: SelectionResult, *, readable: frozenset[str]) -> tuple[SelectionResult, int]:
    """The result as `readable` may see it, and how many bundle items were redacted.

    Items of an unreadable project keep id, project and class; a supersession note naming a unit of
    an unreadable project names both units by id instead of title, in the bundle and in the trace.
    The digests stay those of what the model saw: they still verify against the stored trace.
    """
    trace, bundle = result.trace, result.bundle
    projects = {c.unit_id: c.project for c in trace.candidates}
    for item in bundle.items:
        projects.setdefault(item.sources[0], item.project)

    def hidden(uid: str | None) -> bool:
        return projects.get(uid or "") not in readable

    renamed: dict[tuple[str, str], str] = {}
    ops = []
    for op in trace.coalescing:
        if op.op == CoalescingKind.SUPERSESSION_NOTE.value and (hidden(op.unit_id) or hidden(op.target_id)):
            note = _id_note(op.unit_id, op.target_id)
            renamed[(op.item_id, op.note)] = note
            op = replace(op, note=note)
        ops.append(op)
    items, count = [], 0
    for item in bundle.items:
        if item.project not in readable:
            items.append(redacted_item(item))
            count += 1
            continue
        notes = tuple(renamed.get((item.item_id, n), n) for n in item.notes)
        if notes != item.notes:
            rendered = item.rendered
            for old, new in zip(item.notes, notes, strict=True):
                rendered = rendered.replace(f"History: {old}\n", f"History: {new}\n")
            item = replace(item, notes=notes, rendered=rendered)
        items.append(item)
    if not count and not renamed:
        return result, 0
    bundle = replace(bundle, items=tuple(items), rendered="".join(item.rendered for item in items))
    return SelectionResult(bundle=bundle, trace=replace(trace, coalescing=tuple(ops))), count
