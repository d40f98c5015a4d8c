"""The module map of the tree: every module of every app, with its docstring's first sentence.

A module is any `.py` file of a top-level package (a folder with an `__init__.py`, `tests` and
`scripts` aside) outside `migrations/`; an `__init__.py` is listed only when it holds code, not
when it only marks a package. docs/architecture.md carries the map between the markers below, and
tests/test_docs.py fails when the map and the tree disagree.

    python scripts/module_map.py                           # print the map
    python scripts/module_map.py --write docs/architecture.md   # replace the map in that file

Pure Python: reads files, imports nothing of the project.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START = "<!-- module-map:start -->"
END = "<!-- module-map:end -->"
NOT_APPS = {"tests", "scripts", "docs", "fixtures", "templates", "static"}
SUMMARY_MAX = 150


def app_packages(root: Path = ROOT) -> list[str]:
    """The top-level packages whose modules the map lists, in name order."""
    return sorted(
        p.name
        for p in root.iterdir()
        if p.is_dir() and (p / "__init__.py").is_file() and p.name not in NOT_APPS and not p.name.startswith(".")
    )


def _holds_code(tree: ast.Module) -> bool:
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return bool(body)


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def modules(root: Path = ROOT) -> list[str]:
    """Every listed module's path relative to `root`, with forward slashes, sorted."""
    found = []
    for package in app_packages(root):
        for path in (root / package).rglob("*.py"):
            rel = path.relative_to(root)
            if "migrations" in rel.parts or "__pycache__" in rel.parts:
                continue
            if path.name == "__init__.py" and not _holds_code(_parse(path)):
                continue
            found.append(rel.as_posix())
    return sorted(found)


def summary(path: Path) -> str:
    """The docstring's first sentence on one line ("" when the module has no docstring)."""
    doc = ast.get_docstring(_parse(path)) or ""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    match = re.search(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)\.(\s|$)", first)
    if match:
        first = first[: match.start() + 1]
    if len(first) > SUMMARY_MAX:
        first = first[: SUMMARY_MAX - 1].rstrip() + "…"
    return first.replace("|", "\\|")


def render(root: Path = ROOT) -> str:
    """The map as markdown: one table per app package."""
    by_package: dict[str, list[str]] = {}
    for rel in modules(root):
        by_package.setdefault(rel.split("/")[0], []).append(rel)
    out = []
    for package, rels in by_package.items():
        out += [f"#### `{package}/`", "", "| module | what it holds |", "| --- | --- |"]
        out += [f"| `{rel}` | {summary(root / rel) or '—'} |" for rel in rels]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def section(text: str) -> str:
    """What a document holds between the markers; ValueError when they are missing or out of order."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the document needs {START} followed by {END}")
    return text[start + len(START) : end]


def listed(text: str) -> list[str]:
    """The module paths a document's map names (backquoted paths ending in .py)."""
    return re.findall(r"`([\w./-]+\.py)`", section(text))


def write(document: Path, root: Path = ROOT) -> None:
    text = document.read_text(encoding="utf-8")
    section(text)  # refuses a document without the markers
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    document.write_text(f"{head}{START}\n\n{render(root)}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", metavar="DOCUMENT", type=Path, help="replace the map between the markers of DOCUMENT"
    )
    args = parser.parse_args(argv)
    if args.write:
        write(args.write)
    else:
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
