"""The held-out discipline: dev corpora under fixtures/, test corpora under fixtures/test/. Each
test corpus has the shape of context-lab, `import_fixtures` loads both splits and names each, and
`evaluate --all` prints C6 and the oracle per corpus with its split. Real PostgreSQL, real
embedding model; the corpora are imported once for the module and the database flushed after.
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from selection.corpus import read_corpus
from selection.corpus.splits import DEV, OUTSIDE, TEST, corpus_split, shipped_corpora
from selection.memory import store
from selection.models import Corpus

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SHIPPED = shipped_corpora(FIXTURES)
TESTS = [corpus for corpus in SHIPPED if corpus.split == TEST]


def test_the_shipped_corpora_fall_into_a_dev_and_a_test_split():
    by_split = defaultdict(list)
    for corpus in SHIPPED:
        by_split[corpus.split].append(corpus.name)
    assert "context-lab" in by_split[DEV]
    assert len(by_split[TEST]) >= 2
    assert all(corpus.directory.parent == FIXTURES / "test" for corpus in TESTS)
    assert len({corpus.name for corpus in SHIPPED}) == len(SHIPPED), "corpus names are unique"


@pytest.mark.parametrize("corpus", TESTS, ids=[corpus.name for corpus in TESTS])
def test_a_test_corpus_has_the_shape_of_context_lab(corpus):
    data = read_corpus(corpus.directory)
    assert data.extras.get("x-split") == TEST
    assert len(data.projects) == 3
    assert 60 <= len(data.units) <= 100
    assert 10 <= len(data.tasks) <= 14
    assert (corpus.directory / "README.md").is_file()
    # a same-query pair: one query asked under two work types, with different ledgers
    pairs = defaultdict(list)
    for task in data.tasks:
        if task.pair:
            pairs[task.pair].append(task)
    assert any(
        len({t.query for t in tasks}) == 1
        and len({t.frame.work_type for t in tasks}) == len(tasks) > 1
        and len({tuple(sorted(t.ledger.items())) for t in tasks}) == len(tasks)
        for tasks in pairs.values()
    ), "no same-query pair with different work types and ledgers"
    verdicts = {proposal.id: proposal.extras.get("x-expected-verdict") for proposal in data.proposals}
    assert "promote" in verdicts.values() and "reject" in verdicts.values(), verdicts
    labels = {label for task in data.tasks for label in task.ledger.values()}
    assert {"MUST", "SHOULD", "OPTIONAL", "DISTRACTOR", "HARMFUL"} <= labels


def test_a_corpus_whose_folder_disagrees_with_its_split_is_refused(tmp_path):
    (tmp_path / "stray").mkdir()
    (tmp_path / "stray" / "corpus.yaml").write_text("name: stray\nx-split: test\n")
    with pytest.raises(ValueError, match="ships in the dev folder"):
        shipped_corpora(tmp_path)


def test_a_loaded_corpus_knows_its_split():
    assert corpus_split("waterworks", {"x-split": "test"}, SHIPPED) == TEST
    assert corpus_split("context-lab", {}, SHIPPED) == DEV
    assert corpus_split("book-ch10", {}, SHIPPED) == OUTSIDE


@pytest.fixture(scope="module")
def loaded(django_db_setup, django_db_blocker):
    """What `import_fixtures` printed, then what `evaluate --all --conditions C6,CO` printed."""
    with django_db_blocker.unblock():
        imported, evaluated = io.StringIO(), io.StringIO()
        call_command("import_fixtures", stdout=imported)
        call_command("evaluate", "--all", "--conditions", "C6,CO", stdout=evaluated)
        yield imported.getvalue(), evaluated.getvalue()
        for corpus in Corpus.objects.all():
            store.forget_index(corpus.pk)
        call_command("flush", interactive=False, verbosity=0, reset_sequences=False)


@pytest.mark.django_db
def test_import_fixtures_imports_both_splits_and_names_each(loaded):
    printed = loaded[0]
    for corpus in SHIPPED:
        assert f"{corpus.name} ({corpus.split} split)" in printed
        assert Corpus.objects.filter(name=corpus.name).exists()
    for corpus in TESTS:
        assert Corpus.objects.get(name=corpus.name).extras["x-split"] == TEST
    again = io.StringIO()
    call_command("import_fixtures", stdout=again)
    assert f"{SHIPPED[0].name} ({SHIPPED[0].split} split): already loaded" in again.getvalue()


@pytest.mark.django_db
def test_evaluate_all_prints_dev_and_test_side_by_side(loaded):
    lines = loaded[1].splitlines()
    header = next(line for line in lines if "C6 recall" in line)
    assert header.split()[:2] == ["corpus", "split"]
    for heading in ("C6 recall", "C6 prec.", "C6 tokens", "CO tokens"):
        assert heading in header
    rows = {line.split()[0]: line.split() for line in lines[lines.index(header) + 1 :] if line.strip()}
    assert {row[1] for row in rows.values()} == {DEV, TEST}
    for corpus in SHIPPED:
        row = rows[corpus.name]
        assert row[1] == corpus.split
        assert int(row[2]) == len(read_corpus(corpus.directory).tasks)
        recall, precision = float(row[3]), float(row[4])
        assert 0.0 < precision <= 1.0 and 0.0 < recall <= 1.0
        assert float(row[5]) > 0 and float(row[6]) > 0
    splits = [rows[name][1] for name in rows]
    assert splits == sorted(splits, key=[DEV, TEST, OUTSIDE].index), "dev rows come before test rows"


@pytest.mark.django_db
def test_evaluate_all_refuses_a_name_or_json_beside_it(loaded):
    with pytest.raises(CommandError, match="--all takes no corpus name"):
        call_command("evaluate", "context-lab", "--all")
    with pytest.raises(CommandError, match="give a corpus name"):
        call_command("evaluate")
