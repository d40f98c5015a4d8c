"""The layers hold: lint-imports keeps its contracts, no app imports another inside a function,
and no app papers over a missing module with `except ImportError`."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("config", "rules", "authority", "selection", "governance", "backtest", "bench")
LINT = Path(sys.executable).with_name("lint-imports")


def _run_lint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT), "--config", "pyproject.toml", "--no-cache"],
        cwd=cwd, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)},
    )


def test_the_import_contracts_hold():
    result = _run_lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


def test_an_upward_import_breaks_the_layers_contract(tmp_path):
    # a copy of the tree with one upward import added: selection reaching into backtest
    for app in APPS:
        shutil.copytree(ROOT / app, tmp_path / app, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    services = tmp_path / "selection" / "serving" / "selections.py"
    services.write_text(services.read_text() + "\nfrom backtest import models  # upward\n")
    result = _run_lint(tmp_path)
    assert result.returncode == 1
    assert "selection is not allowed to import backtest" in result.stdout
    assert "selection.serving.selections -> backtest.models" in result.stdout


def _sources():
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                yield app, path


def _nested_imports(tree: ast.AST):
    """(line, module) of every import inside a function body."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.level == 0 and inner.module:
                    yield inner.lineno, inner.module
                elif isinstance(inner, ast.Import):
                    for alias in inner.names:
                        yield inner.lineno, alias.name


def test_no_function_level_import_of_another_app():
    found = []
    for app, path in _sources():
        for line, module in _nested_imports(ast.parse(path.read_text())):
            root = module.split(".")[0]
            if root in APPS and root != app:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not found, "\n".join(found)


def test_no_import_error_seams():
    found = []
    for _app, path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                names = [n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)]
                if "ImportError" in names or "ModuleNotFoundError" in names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("app", APPS)
def test_every_app_has_its_layer(app):
    # a new app must be placed in the contract, or nothing checks where it sits
    text = (ROOT / "pyproject.toml").read_text()
    assert f'"{app}"' in text.split("[tool.importlinter]")[1]
