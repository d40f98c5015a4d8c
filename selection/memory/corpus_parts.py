"""Parts of a corpus that belong to apps above selection: proposals.yaml is governance's.

selection never imports those apps. Each registers a CorpusPart at start-up (AppConfig.ready);
the importer calls every part inside its one transaction (so a part's failure leaves zero rows)
and the exporter asks every part for its specs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from selection.corpus import CorpusData, CorpusIssue, ProposalSpec


@dataclass(frozen=True)
class ImportedCorpus:
    """What a part may build on: the rows the importer wrote before it, in the same transaction."""

    data: CorpusData
    corpus: Any  # selection.models.Corpus
    projects: dict[str, Any]  # slug -> selection.models.Project
    first_versions: dict[str, Any]  # slug -> the imported authority.models.FrameVersion (v1)
    carried: dict[str, set[str]]  # slug -> evidence classes its units carry
    actor: Any


class CorpusPart(Protocol):
    def too_long(self, data: CorpusData) -> list[CorpusIssue]:
        """Values the format allows but this part's columns cannot hold."""

    def write(self, imported: ImportedCorpus, advanced) -> None:
        """Write this part's rows; `advanced(n)` reports n items done."""

    def export(self, projects: Sequence[Any], extras: dict[str, Any]) -> list[ProposalSpec]:
        """This part's specs for the exported corpus."""


_parts: list[CorpusPart] = []


def register_corpus_part(part: CorpusPart) -> None:
    if part not in _parts:
        _parts.append(part)


def corpus_parts() -> tuple[CorpusPart, ...]:
    return tuple(_parts)
