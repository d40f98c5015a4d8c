"""What every bench part reports with: percentile summaries, the machine, the peak memory, targets
and a part run alone."""

from __future__ import annotations

import contextlib
import os
import platform
import resource
from collections.abc import Callable

import numpy as np


def summary(values_ms: list[float]) -> dict:
    arr = np.asarray(values_ms, dtype=np.float64)
    if arr.size == 0:
        return {"p50_ms": None, "p95_ms": None, "n": 0}
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p95_ms": round(float(np.percentile(arr, 95)), 3),
        "n": int(arr.size),
    }


def machine() -> dict:
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo if "model name" in ln), "")
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def check(name: str, value: float, op: str, limit: float, unit: str) -> dict:
    """A bench target as the JSON and the printed lines carry it: met when `value` `op` `limit`."""
    met = value <= limit if op == "<=" else value >= limit
    return {"target": name, "value": value, "limit": f"{op} {limit} {unit}", "met": bool(met)}


def unmeasured(name: str, op: str, limit: float, unit: str, why: str) -> dict:
    """A target this run could not measure: not met (nothing shows it is), with the reason."""
    return {"target": name, "value": None, "limit": f"{op} {limit} {unit}", "met": False, "why": why}


def target_line(target: dict) -> str:
    """A target as the printed lines show it: MET or MISSED, its name, value and limit (or why it
    was not measured)."""
    if target.get("why"):
        return f"target MISSED {target['target']}: not measured, {target['why']} (limit {target['limit']})"
    return (f"target {'MET   ' if target['met'] else 'MISSED'} {target['target']}: {target['value']} "
            f"(limit {target['limit']})")


def part_main(run: Callable[..., dict], defaults: list[int], describe: Callable[[dict], str],
              targets: Callable[[dict], list[dict]]) -> None:
    """A bench part run alone (`python -m bench.<part> [N ...]`): its integer arguments (the rest
    from `defaults`), on one BLAS thread, Django set up for the serving function; prints its line,
    its targets and its JSON."""
    import json
    import sys

    from threadpoolctl import threadpool_limits

    from bench.held import django_ready

    django_ready()
    args = [int(a) for a in sys.argv[1 : 1 + len(defaults)]]
    with threadpool_limits(1):
        result = run(*(args + defaults[len(args):]))
    print(describe(result))
    for target in targets(result):
        print(target_line(target))
    print(json.dumps(result))
