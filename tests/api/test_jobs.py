"""Corpus uploads and evaluations over the API: checked in the request, run as jobs on a worker."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.api.conftest import API, ApiClient, assert_problem
from tests.selection.test_traces import write_lab


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    settings.FG_UPLOAD_DIR = str(tmp_path / "uploads")
    return Path(settings.FG_UPLOAD_DIR)


def _tar(directory: Path, extra: dict[str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(directory, arcname=directory.name)
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(directory.rglob("*")):
            archive.write(path, path.relative_to(directory))
    return buffer.getvalue()


def _upload(client, data: bytes, name: str = "corpus.tar.gz", headers=None):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return client.post(f"{API}/corpora", {"archive": SimpleUploadedFile(name, data)}, headers=headers or {})


@pytest.fixture
def root_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-root"))
    return client


@pytest.mark.parametrize("pack", [_tar, _zip])
def test_an_uploaded_corpus_is_checked_then_imported_by_its_job(root_client, tmp_path, upload_dir, pack):
    from selection.evaluation.jobs import job_run
    from selection.models import Corpus

    response = _upload(root_client, pack(write_lab(tmp_path / "tlab")))
    assert response.status_code == 202, response.content
    job = response.json()
    assert response["Location"] == job["url"] and job["status"] == "queued"
    assert not Corpus.objects.filter(name="tlab").exists()  # nothing imported before the worker runs

    assert job_run(job["id"]).status == "finished"  # as the worker does
    done = root_client.get(job["url"]).json()
    assert done["status"] == "finished" and done["result"]["projects"] == ["tlab", "tother"]
    assert done["result_url"] == f"{API}/corpora/tlab/evaluations"
    assert Corpus.objects.get(name="tlab").units.count() == done["result"]["units"] > 0
    assert list(upload_dir.iterdir()) == []  # the staged files are gone
    page = root_client.get(done["page_url"]).content.decode()
    assert "Imported <code>tlab</code>" in page


def test_an_archive_escaping_its_folder_is_refused_whole(root_client, tmp_path, upload_dir):
    from selection.models import Corpus, Job

    data = _tar(write_lab(tmp_path / "tlab"), {"../../escape.txt": b"x"})
    doc = assert_problem(_upload(root_client, data), 422)
    assert "outside the archive" in doc["detail"]
    assert not (tmp_path / "escape.txt").exists()
    assert not Corpus.objects.filter(name="tlab").exists() and not Job.objects.exists()
    assert list(upload_dir.iterdir()) == []


def test_limits_give_413(root_client, tmp_path, monkeypatch):
    from selection.memory import uploads

    monkeypatch.setattr(uploads, "MAX_MEMBERS", 3)
    doc = assert_problem(_upload(root_client, _tar(write_lab(tmp_path / "tlab"))), 413)
    assert "members" in doc["detail"]
    monkeypatch.setattr(uploads, "MAX_ARCHIVE_BYTES", 10)
    assert_problem(_upload(root_client, _tar(write_lab(tmp_path / "tlab"))), 413)


def test_a_broken_corpus_lists_every_issue_and_writes_nothing(root_client, tmp_path):
    from selection.models import Corpus, Job

    lab = write_lab(tmp_path / "tlab")
    (lab / "units.jsonl").write_text((lab / "units.jsonl").read_text() + "{not json\n")
    doc = assert_problem(_upload(root_client, _tar(lab)), 422)
    assert doc["errors"] and doc["errors"][0]["location"][:3] == ["body", "archive", "units.jsonl"]
    assert_problem(_upload(root_client, b"not an archive at all"), 422)
    assert not Corpus.objects.filter(name="tlab").exists() and not Job.objects.exists()


def test_only_a_signed_in_superuser_imports(client, people, token_for, tmp_path):
    data = _tar(write_lab(tmp_path / "tlab"))
    lead = {"Authorization": f"Bearer {token_for(people['lead'], 'sift', 'lead')}"}
    assert_problem(_upload(client, data, headers=lead), 403)
    client.force_login(people["lead"])
    assert_problem(_upload(client, data), 403)


def test_an_evaluation_runs_as_a_job(api, people, token_for):
    from selection.evaluation.jobs import job_run

    lead = api(token_for(people["lead"], "sift", "lead"))
    assert_problem(lead.post("/corpora/context-lab/evaluations", {"conditions": ["C9"]}), 422)
    assert_problem(api(token_for(people["auditor"], "sift", "auditor")).post("/corpora/context-lab/evaluations"), 403)
    response = lead.post("/corpora/context-lab/evaluations", {"conditions": ["C0"]})
    assert response.status_code == 202, response.content
    job = response.json()
    job_run(job["id"])
    done = lead.get(f"/jobs/{job['id']}").json()
    assert done["status"] == "finished" and done["done"] == done["total"] > 0
    evaluation = ApiClient(lead.client, None)  # the result URL is part of the API, read with the token
    assert lead.get(done["result_url"].removeprefix(API)).json()["conditions"] == ["C0"]
    assert evaluation.headers == {}
    assert_problem(api(token_for(people["outsider"])).get(f"/jobs/{job['id']}"), 403)
