"""Index restart: the engine index written in the index cache's format, then read back by a fresh
Python process that serves selections from it. Reports what a restarted web or worker process pays
before its first selection and the memory it holds while serving. No database.

The child process is started by `python -m bench.parts.index_restart DIR`; the page cache is warm (the
directory was just written), as after a restart on a machine that keeps running. The child sets
Django up (as a web or worker process has it) before it reads the index, and serves every selection
through selection.serving.select_for_user (bench/held.py); its selection times are the serving
function's select() stage.

`python -m bench.parts.index_restart --size N [--ivf-from M]` measures this part alone on a generated
corpus of N units (the bench's seed and tasks; the IVF from M units, 50,000 by default) and prints
the figures as JSON, with the generation and build times of the measuring process.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.generator import generate
from bench.held import Ask, CpuTimings, django_ready, held, serve, task_asks
from bench.stats import summary
from selection.engine.index import IVF_THRESHOLD, CorpusIndex
from selection.engine.timings import TimedStage
from selection.engine.types import ProjectFrame
from selection.memory.index_cache import read_index, write_index

INDEX = "index"
ASKS = "asks.pickle"
CHILD_TIMEOUT_S = 1800


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def time_restart(
    index: CorpusIndex, frames: dict[str, ProjectFrame], asks: list[Ask], blas_threads: int | None = None
) -> dict:
    """Write `index`, then a fresh process serving `asks` under `frames`: index load, first
    selection, later selections, peak RSS (`blas_threads`: the child's BLAS threads, as the bench
    limits its own)."""
    with tempfile.TemporaryDirectory(prefix="fg-bench-index-") as directory:
        root = Path(directory)
        begun = time.perf_counter()
        write_index(root / INDEX, index)
        write_s = time.perf_counter() - begun
        with (root / ASKS).open("wb") as handle:
            pickle.dump((dict(frames), list(asks)), handle, protocol=pickle.HIGHEST_PROTOCOL)
        project = Path(__file__).resolve().parent.parent
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(project), env.get("PYTHONPATH", "")]))
        if blas_threads:
            for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                env[name] = str(blas_threads)
        done = subprocess.run(
            [sys.executable, "-m", "bench.parts.index_restart", directory],
            cwd=project, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the index restart child failed:\n{done.stderr[-2000:]}")
        child = json.loads(done.stdout.strip().splitlines()[-1])
        child["write_s"] = round(write_s, 2)
        child["bytes"] = _bytes(root / INDEX)
        return child


def _serve(directory: Path) -> dict:
    django_ready()
    begun, begun_cpu = time.perf_counter(), time.process_time()
    index = read_index(directory / INDEX)
    load_s, load_cpu_s = time.perf_counter() - begun, time.process_time() - begun_cpu
    rss_loaded = _rss_mb()
    with (directory / ASKS).open("rb") as handle:
        frames, asks = pickle.load(handle)
    corpus = held(frames, index, asks)
    # the process's CPU time (page faults on the mapped files included), as for the load
    timings = CpuTimings(cpu_clock=time.process_time)
    serve(corpus, asks[0], timings)
    first_select_s = timings.ms(TimedStage.SELECT) / 1e3
    first_cpu_s = timings.cpu_ms(TimedStage.SELECT) / 1e3
    later = []
    for ask in asks[1:]:
        timings.clear()
        serve(corpus, ask, timings)
        later.append(timings.ms(TimedStage.SELECT))
    return {
        "load_s": round(load_s, 2),
        "first_select_s": round(first_select_s, 2),
        "first_selection_s": round(load_s + first_select_s, 2),  # the restart's cost, all told
        # the same in the process's CPU time (page faults on the mapped files included): on a
        # loaded machine the wall clock mostly measures the run queue
        "load_cpu_s": round(load_cpu_s, 2),
        "first_select_cpu_s": round(first_cpu_s, 2),
        "later_selections": summary(later),
        "rss_after_load_mb": rss_loaded,
        "rss_after_selections_mb": _rss_mb(),
        "peak_rss_mb": _peak_rss_mb(),
        # of the RSS after the selections: pages of the mapped index files (shared by every process
        # mapping them, dropped by the kernel under pressure) and the process's own memory
        "rss_file_mb": _status_mb("RssFile"),
        "rss_anon_mb": _status_mb("RssAnon"),
    }


def _status_mb(field: str) -> float | None:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def _peak_rss_mb() -> float:
    """VmHWM, this process image's own peak: getrusage's ru_maxrss keeps the forking parent's peak
    across exec, so a child started by a big process would report the parent's."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return round(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def _standalone(argv: list[str]) -> dict:
    size = int(argv[argv.index("--size") + 1])
    ivf_from = int(argv[argv.index("--ivf-from") + 1]) if "--ivf-from" in argv else IVF_THRESHOLD
    begun = time.process_time()
    bench = generate(size)
    generate_cpu_s = time.process_time() - begun
    begun = time.process_time()
    index = CorpusIndex.build(bench.units, bench.vectors, dense_threshold=ivf_from)
    build_cpu_s = time.process_time() - begun
    frames, asks = bench.frames, task_asks(bench.tasks, "C6")
    del bench
    out = {"units": size, "dense_searcher": index.dense.name, "generate_cpu_s": round(generate_cpu_s, 2),
           "build_cpu_s": round(build_cpu_s, 2)}
    out.update(time_restart(index, frames, asks, blas_threads=1))
    out["builder_peak_rss_mb"] = _peak_rss_mb()
    return out


if __name__ == "__main__":
    if "--size" in sys.argv:
        print(json.dumps(_standalone(sys.argv[1:]), indent=2))
    else:
        print(json.dumps(_serve(Path(sys.argv[1]))))
