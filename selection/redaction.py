"""What a reader may see of another project's units: their id, project and class, never their text.

A trace of one project can hold units of another (a widened scope, a candidate the scope rule
refused). Pages show such a unit's text only to someone who holds a role in its project; to anyone
else the bundle item keeps its id, project and class and says it is redacted.
"""

from __future__ import annotations

from dataclasses import replace

from selection.engine.types import BundleItem, ContextBundle

REDACTED = "[redacted: you hold no role in project {project}]"


def redacted_item(item: BundleItem) -> BundleItem:
    note = REDACTED.format(project=item.project)
    return replace(item, text=note, rendered=note, notes=())


def redacted_bundle(bundle: ContextBundle, *, readable: frozenset[str]) -> tuple[ContextBundle, int]:
    """The bundle with every item of a project outside `readable` redacted, and how many were."""
    items = tuple(item if item.project in readable else redacted_item(item) for item in bundle.items)
    hidden = sum(1 for item in bundle.items if item.project not in readable)
    if not hidden:
        return bundle, 0
    rendered = "\n\n".join(item.rendered for item in items)
    # the digest stays the one of what the model saw: it still verifies against the stored trace
    return replace(bundle, items=items, rendered=rendered), hidden
