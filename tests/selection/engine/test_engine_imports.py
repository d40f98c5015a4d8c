"""The engine tests, and the conftests and plugins pytest loads with them, import no Django, no
Celery and no model package: they run in seconds on a machine with none of them set up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
REPO = TESTS.parent
HEAVY = (
    "django", "celery", "kombu", "ninja", "redis", "psycopg",
    "torch", "transformers", "FlagEmbedding", "sentence_transformers", "onnxruntime",
)  # fmt: skip

# imports each file as pytest's importlib mode does (a module of its own, registered first), then
# prints the heavy packages that are loaded
CHECK = """
import importlib.util, sys
heavy, paths = sys.argv[1].split(","), sys.argv[2:]
for number, path in enumerate(paths):
    spec = importlib.util.spec_from_file_location(f"engine_check_{number}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
print(",".join(name for name in heavy if name in sys.modules))
"""


def test_the_engine_tests_import_no_django_celery_or_model_package():
    files = [
        TESTS / "conftest.py", TESTS / "browser.py", TESTS / "parallel.py",
        *sorted(HERE.glob("*.py")),
    ]  # fmt: skip
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE)])
    done = subprocess.run(
        [sys.executable, "-c", CHECK, ",".join(HEAVY), *map(str, files)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(files) > 10
    assert done.stdout.strip() == "", f"the engine tests import {done.stdout.strip()}"
