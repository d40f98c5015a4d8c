"""Corpus archives sent over HTTP: unpacked under limits into a private directory, then imported.

The archive is checked whole before anything is unpacked: its size, its member count, the total
unpacked size, and every member's name and kind (regular files and directories only; no absolute
path, no "..", no link). The unpacked directory then goes through `corpus_import`, which checks
the corpus in full before writing any row, so an upload is all or nothing.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings

from authority import access
from selection.memory.importing import corpus_check

MAX_ARCHIVE_BYTES = getattr(settings, "FG_MAX_CORPUS_ARCHIVE_BYTES", 64 * 1024 * 1024)
MAX_UNPACKED_BYTES = getattr(settings, "FG_MAX_CORPUS_UNPACKED_BYTES", 512 * 1024 * 1024)
MAX_MEMBERS = getattr(settings, "FG_MAX_CORPUS_MEMBERS", 2000)
CORPUS_FILE = "corpus.yaml"


class ArchiveRefused(ValueError):
    """An archive that cannot be unpacked safely, or holds no corpus; nothing was written."""

    status = 422


class ArchiveTooLarge(ArchiveRefused):
    status = 413


@dataclass(frozen=True)
class Member:
    name: str
    size: int
    is_dir: bool


def _safe_name(name: str) -> str:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise ArchiveRefused(f"archive member {name!r} would be written outside the archive")
    return str(path)


def _check(members: list[Member], archive_bytes: int) -> None:
    if archive_bytes > MAX_ARCHIVE_BYTES:
        raise ArchiveTooLarge(f"the archive is {archive_bytes} bytes; the limit is {MAX_ARCHIVE_BYTES}")
    if len(members) > MAX_MEMBERS:
        raise ArchiveTooLarge(f"the archive holds {len(members)} members; the limit is {MAX_MEMBERS}")
    unpacked = sum(m.size for m in members)
    if unpacked > MAX_UNPACKED_BYTES:
        raise ArchiveTooLarge(f"the archive unpacks to {unpacked} bytes; the limit is {MAX_UNPACKED_BYTES}")
    for member in members:
        _safe_name(member.name)


def _tar_members(archive: tarfile.TarFile) -> list[Member]:
    members = []
    for info in archive.getmembers():
        if not (info.isfile() or info.isdir()):
            raise ArchiveRefused(f"archive member {info.name!r} is a link or a device: only files and directories")
        members.append(Member(info.name, info.size, info.isdir()))
    return members


def _zip_members(archive: zipfile.ZipFile) -> list[Member]:
    members = []
    for info in archive.infolist():
        mode = (info.external_attr >> 16) & 0o170000
        if mode and mode not in (0o100000, 0o040000):
            raise ArchiveRefused(f"archive member {info.filename!r} is a link or a device: only files and directories")
        members.append(Member(info.filename, info.file_size, info.is_dir()))
    return members


def unpack(path: Path, size: int, into: Path) -> Path:
    """Unpack the archive at `path` into `into` after checking it whole; the corpus directory."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            _check(_zip_members(archive), size)
            for info in archive.infolist():
                target = into / _safe_name(info.filename)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(target, "wb") as out:
                    _copy_limited(source, out, info.file_size)
    else:
        try:
            archive = tarfile.open(path, mode="r:*")
        except (tarfile.TarError, OSError) as error:
            raise ArchiveRefused("the upload is neither a .zip nor a .tar(.gz) archive") from error
        with archive:
            try:
                members = _tar_members(archive)
            except (tarfile.TarError, EOFError, OSError) as error:
                raise ArchiveRefused(f"the archive is damaged: {error}") from error
            _check(members, size)
            archive.extractall(into, filter="data")
    found = sorted(p.parent for p in into.rglob(CORPUS_FILE) if p.is_file())
    if len(found) != 1:
        raise ArchiveRefused(
            f"the archive must hold exactly one {CORPUS_FILE} (at its root or in one folder); it holds {len(found)}"
        )
    return found[0]


def _copy_limited(source, out, declared: int) -> None:
    # a zip member's declared size is what we checked; refuse one that inflates past it
    written = 0
    while chunk := source.read(1 << 16):
        written += len(chunk)
        if written > declared:
            raise ArchiveRefused("an archive member unpacks to more than its declared size")
        out.write(chunk)


def corpus_upload_stage(*, user, upload) -> Path:
    """Check an uploaded corpus archive in full and keep its corpus directory for the import job.

    Raises AccessDenied, ArchiveRefused (ArchiveTooLarge: 413) or CorpusError (every issue of the
    corpus) with nothing kept; returns the staged corpus directory, under FG_UPLOAD_DIR.
    """
    access.access_corpus_import(user)
    if upload.size is not None and upload.size > MAX_ARCHIVE_BYTES:
        raise ArchiveTooLarge(f"the archive is {upload.size} bytes; the limit is {MAX_ARCHIVE_BYTES}")
    staging = Path(settings.FG_UPLOAD_DIR)
    staging.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="corpus-", dir=staging))
    try:
        archive = scratch / "archive"
        with open(archive, "wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        root = scratch / "corpus"
        root.mkdir()
        try:
            directory = unpack(archive, archive.stat().st_size, root)
        except (zipfile.BadZipFile, tarfile.TarError, EOFError) as error:
            raise ArchiveRefused(f"the archive is damaged: {error}") from error
        archive.unlink()
        corpus_check(directory)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return directory


def staged_root(directory: Path) -> Path:
    """The folder corpus_upload_stage made for one upload (removed once the import is done)."""
    staging = Path(settings.FG_UPLOAD_DIR).resolve()
    directory = Path(directory).resolve()
    if staging not in directory.parents:
        raise ArchiveRefused(f"{directory} is not a staged upload")
    return staging / directory.relative_to(staging).parts[0]
