"""write_corpus writes what read_corpus reads back unchanged."""

from __future__ import annotations

import json

import pytest

from selection.corpus import read_corpus, write_corpus


def replaced(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


@pytest.fixture
def rich_corpus(make_corpus, samples):
    """The sample corpus with "x-" keys at nested levels, an offset time and non-ASCII text."""
    units = samples.with_unit(1, open_loop={"status": "closed", "kind": "question", "x-id": "ol-1"})
    units[0]["text"] = "Règles testées contre une base « forte »."
    units[3]["created_at"] = "2026-09-02T08:30:00.250000-05:00"
    tasks = replaced(
        samples.tasks, "content: Review the rules.}", "content: Review the rules., x-raw: 1}"
    )
    tasks = replaced(tasks, "work_type: [s1, s2]}", "work_type: [s1, s2], x-by: hand}")
    corpus = replaced(samples.corpus, "max_drop: 0.02}", "max_drop: 0.02, x-why: noise}")
    # work types in an order that is not alphabetical: the written frame must keep it
    corpus = replaced(
        corpus,
        "        review: [rule, note]\n        release: [note]\n",
        "        release: [note]\n        review: [rule, note]\n",
    )
    tasks = "x-generated-by: hand\n" + tasks
    proposals = samples.proposals + "x-base: v1\n"
    return make_corpus(corpus=corpus, units=units, tasks=tasks, proposals=proposals)


def test_read_write_read_gives_the_same_corpus(rich_corpus, tmp_path):
    original = read_corpus(rich_corpus)
    again = read_corpus(write_corpus(original, tmp_path / "out"))

    assert again == original
    assert list(again.project("alpha").frame["work_types"]) == ["release", "review"]
    assert again.units[1].open_loop_extras == {"x-id": "ol-1"}
    assert again.units[3].unit.created_at.utcoffset().total_seconds() == -5 * 3600
    assert again.tasks_extras == {"x-generated-by": "hand"}
    assert again.proposals_extras == {"x-base": "v1"}


def test_writing_is_stable(rich_corpus, tmp_path):
    data = read_corpus(rich_corpus)
    first = write_corpus(data, tmp_path / "one")
    second = write_corpus(read_corpus(first), tmp_path / "two")
    for name in ("corpus.yaml", "units.jsonl", "tasks.yaml", "proposals.yaml"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_units_are_one_object_per_line_in_a_stable_key_order(rich_corpus, tmp_path):
    out = write_corpus(read_corpus(rich_corpus), tmp_path / "out")
    lines = (out / "units.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    objects = [json.loads(line) for line in lines]
    assert list(objects[0]) == [
        "id",
        "project",
        "class",
        "title",
        "text",
        "created_at",
        "valid_from",
        "x-claim",
    ]
    assert list(objects[1])[:3] == ["id", "project", "class"]
    # absent optional keys are left out, not written as null or empty
    assert list(objects[2]) == ["id", "project", "class", "text"]
    assert objects[0]["valid_from"] == "2026-09-01T10:00:00+02:00"
    assert "« forte »" in lines[0]


def test_times_and_order_in_yaml_read_like_the_format_page(rich_corpus, tmp_path):
    out = write_corpus(read_corpus(rich_corpus), tmp_path / "out")
    corpus_text = (out / "corpus.yaml").read_text(encoding="utf-8")
    assert corpus_text.startswith("name: tiny\ndescription: ")
    assert "standpoint: 2026-09-20T12:00:00Z\n" in corpus_text
    assert "x-source:" in corpus_text
    assert "\n  standpoint: 2026-09-20T12:00:00Z\n" in (out / "tasks.yaml").read_text(
        encoding="utf-8"
    )


def test_refuses_to_overwrite_unless_asked(rich_corpus, tmp_path):
    data = read_corpus(rich_corpus)
    out = write_corpus(data, tmp_path / "out")
    with pytest.raises(FileExistsError):
        write_corpus(data, out)


def test_overwrite_removes_optional_files_the_corpus_no_longer_has(rich_corpus, tmp_path):
    out = write_corpus(read_corpus(rich_corpus), tmp_path / "out")
    (rich_corpus / "tasks.yaml").unlink()
    (rich_corpus / "proposals.yaml").unlink()
    bare = read_corpus(rich_corpus)
    write_corpus(bare, out, overwrite=True)
    assert not (out / "tasks.yaml").exists() and not (out / "proposals.yaml").exists()
    assert read_corpus(out) == bare
