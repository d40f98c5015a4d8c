"""The house's rooms stay small: no module of the apps past 400 lines (migrations aside), and no app
folder with more than a dozen modules beside its sub-packages. Pure: no Django, no database."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("authority", "backtest", "bench", "config", "governance", "rules", "selection")
MOST_LINES = 400
MOST_FLAT_MODULES = 12


def _modules():
    for app in APPS:
        folder = ROOT / app
        if folder.is_dir():
            yield from (p for p in sorted(folder.rglob("*.py")) if "migrations" not in p.parts)


def test_no_module_of_the_apps_is_past_four_hundred_lines():
    long = [
        f"{path.relative_to(ROOT)} ({lines} lines)"
        for path in _modules()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES
    ]
    assert not long, f"modules past {MOST_LINES} lines want to become a folder: {', '.join(long)}"


def test_no_app_folder_holds_more_than_a_dozen_modules_beside_its_sub_packages():
    crowded = []
    for app in APPS:
        folder = ROOT / app
        if folder.is_dir():
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            if len(modules) > MOST_FLAT_MODULES:
                crowded.append(f"{app}/ ({len(modules)} modules)")
    assert not crowded, f"app folders that want sub-packages by concern: {', '.join(crowded)}"
