"""The split of a shipped corpus: dev corpora under fixtures/, test corpora under fixtures/test/.

A corpus declares its split in corpus.yaml as `x-split: test` (kept in the corpus's extras on
import, so a loaded corpus knows it); a corpus that declares none is a dev corpus. The folder it
ships in must agree with what it declares. A loaded corpus that neither declares a split nor ships
under fixtures/ (the book, a user's own) is `outside`: evaluated like any other, never a split.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SPLIT_KEY = "x-split"
DEV, TEST, OUTSIDE = "dev", "test", "outside"
SPLITS = (DEV, TEST)
TEST_FOLDER = "test"


@dataclass(frozen=True)
class ShippedCorpus:
    name: str
    split: str
    directory: Path


def declared_split(extras: dict[str, Any] | None) -> str:
    """The split a corpus's extras (or its corpus.yaml mapping) declare: `dev` when none."""
    return str((extras or {}).get(SPLIT_KEY) or DEV)


def shipped_corpora(root: Path) -> list[ShippedCorpus]:
    """Every corpus directory under `root` (dev) and `root/test` (test), dev first, each by name.

    Raises ValueError when a corpus declares a split other than its folder's, or an unknown one."""
    found = []
    for split, folder in ((DEV, root), (TEST, root / TEST_FOLDER)):
        for corpus_yaml in sorted(folder.glob("*/corpus.yaml")):
            header = yaml.safe_load(corpus_yaml.read_text(encoding="utf-8")) or {}
            declared = declared_split(header)
            if declared not in SPLITS:
                raise ValueError(f"{corpus_yaml}: {SPLIT_KEY} is {declared!r}; expected one of {', '.join(SPLITS)}")
            if declared != split:
                raise ValueError(
                    f"{corpus_yaml}: {SPLIT_KEY} is {declared!r} but the corpus ships in the {split} folder"
                )
            found.append(ShippedCorpus(name=str(header.get("name") or ""), split=split, directory=corpus_yaml.parent))
    return found


def corpus_split(name: str, extras: dict[str, Any] | None, shipped: list[ShippedCorpus]) -> str:
    """The split of a loaded corpus: what it declares, else `dev` when it ships under fixtures/,
    else `outside`."""
    if (extras or {}).get(SPLIT_KEY):
        return declared_split(extras)
    return DEV if any(corpus.name == name and corpus.split == DEV for corpus in shipped) else OUTSIDE
