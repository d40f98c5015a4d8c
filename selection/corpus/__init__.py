"""The corpus interchange format, version 1: read, check and write a corpus; no Django here."""

from selection.corpus.contents import (
    CorpusData,
    ProjectSpec,
    ProposalSpec,
    SignalSpec,
    TaskFrameSpec,
    TaskSpec,
    UnitRecord,
)
from selection.corpus.issues import CorpusError, CorpusIssue
from selection.corpus.reader import read_corpus
from selection.corpus.writer import write_corpus

__all__ = [
    "CorpusData",
    "CorpusError",
    "CorpusIssue",
    "ProjectSpec",
    "ProposalSpec",
    "SignalSpec",
    "TaskFrameSpec",
    "TaskSpec",
    "UnitRecord",
    "read_corpus",
    "write_corpus",
]
