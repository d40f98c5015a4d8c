"""Every corpus shipped under fixtures/ (dev) and fixtures/test/ (test) reads without an issue and
writes back unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from selection.corpus import read_corpus, write_corpus

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SHIPPED = sorted(path.parent for pattern in ("*/corpus.yaml", "test/*/corpus.yaml") for path in FIXTURES.glob(pattern))


@pytest.mark.parametrize("directory", SHIPPED, ids=[path.relative_to(FIXTURES).as_posix() for path in SHIPPED])
def test_shipped_corpus_reads_and_round_trips(directory, tmp_path):
    data = read_corpus(directory)
    assert data.units, f"{directory.name} has no units"
    assert read_corpus(write_corpus(data, tmp_path / "out")) == data
