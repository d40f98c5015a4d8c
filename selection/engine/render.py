"""Canonical rendering of bundle items and the bundle digest: the bytes the model sees are the bytes
we hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .types import estimate_tokens

ITEM_SEPARATOR = (
    "\n"  # every rendered item ends with a blank line; the bundle is their concatenation
)


def render_item(
    *,
    sources: Sequence[str],
    evidence_class: str,
    title: str,
    text: str,
    contradicts: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> str:
    """
    [unit-id, folded-id, ...] evidence_class: title
    text
    Contradicts: unit-id, ...          (a refuting unit)
    History: old, superseded by new    (one line per supersession note)
    """
    header = f"[{', '.join(sources)}] {evidence_class}"
    if title:
        header += f": {title}"
    lines = [header, text]
    if contradicts:
        lines.append(f"Contradicts: {', '.join(contradicts)}")
    lines.extend(f"History: {note}" for note in notes)
    return "\n".join(lines) + "\n" + ITEM_SEPARATOR


def item_tokens(rendered: str) -> int:
    return estimate_tokens(rendered)


def render_bundle(rendered_items: Sequence[str]) -> tuple[str, int, str]:
    """The bundle text, its estimated tokens (ceil(len/4), never above the sum of item estimates),
    and sha256.
    """
    text = "".join(rendered_items)
    return text, estimate_tokens(text), hashlib.sha256(text.encode("utf-8")).hexdigest()
