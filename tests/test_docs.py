"""The docs describe today's tree: architecture.md's module map matches the modules on disk, and no
doc, code, comment or name carries an issue number or dated narration. Pure: no Django, no database."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _module_map():
    spec = importlib.util.spec_from_file_location("module_map", ROOT / "scripts" / "module_map.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_module_map_lists_every_module_of_the_tree():
    module_map = _module_map()
    listed = module_map.listed(ARCHITECTURE.read_text(encoding="utf-8"))
    on_disk = set(module_map.modules(ROOT))
    missing = sorted(on_disk - set(listed))
    assert not missing, (
        f"docs/architecture.md's module map omits {len(missing)} module(s): {', '.join(missing)}"
        " (python scripts/module_map.py --write docs/architecture.md regenerates it)"
    )


def test_every_path_in_the_module_map_exists():
    module_map = _module_map()
    listed = module_map.listed(ARCHITECTURE.read_text(encoding="utf-8"))
    gone = sorted(rel for rel in set(listed) if not (ROOT / rel).is_file())
    assert not gone, f"docs/architecture.md's module map names paths that do not exist: {', '.join(gone)}"
    twice = sorted({rel for rel in listed if listed.count(rel) > 1})
    assert not twice, f"the module map lists these modules more than once: {', '.join(twice)}"


# What narrates the work instead of describing the product. Each pattern is chosen so that the
# product's own words pass: "no longer current" (a stale proposal), "the old one" (a rebased
# proposal), a pytest or Django session, CSS colours (#475467), `trace #{pk}`.
NARRATION = {
    "an issue number": r"\bissues?[ _-]?\d+",
    "an issue tag in a name": r"(?:\b|_)i[1-9]\d_[a-z]",
    "an issue reference (#N)": r"(?<![\w&#/{])(?<!\]\()#\d{1,4}(?![\w-])",
    "a numbered or dated work session": (
        r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|this|last|previous|earlier|"
        r"later|next)\s+session\b"
    ),
    "a refactor": r"\brefactor",
    "legacy": r"\blegacy\b",
    "what code used to do": r"(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bbeen )(?<!\bwas )(?<!\bwere )\bused to\b",
    "a comparison with the past (as before)": r"\bas before\b",
    "previously / formerly / anymore": r"\b(?:previously|formerly|anymore|nowadays)\b",
    "a pass of the work (second pass)": r"\b(?:second|third|fourth) pass\b",
    "a path kept for old work": r"\b(?:still served|before chunks|backward[s]? compat\w*|back-compat\w*)\b",
    "what was added": r"\b(?:was|were) (?:added|introduced|renamed|rewritten|refactored)\b",
}
# in markdown only: a "#" line of Python is a comment, and Django dates the files it generates
MARKDOWN_NARRATION = {"a dated heading": r"^#+ .*\b20\d\d-\d\d-\d\d\b"}
PATTERNS = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in NARRATION.items()}
MARKDOWN_PATTERNS = {name: re.compile(pattern) for name, pattern in MARKDOWN_NARRATION.items()}

APPS_AND_TOOLS = ("authority", "backtest", "bench", "config", "governance", "selection", "scripts", "tests")
SKIPPED = {"tests/vendor", "static/vendor"}
THIS_FILE = Path(__file__).resolve()


def _scanned_files():
    yield from sorted((ROOT / "docs").rglob("*"))
    yield ROOT / "README.md"
    yield ROOT / "fixtures" / "README.md"
    yield from sorted((ROOT / "fixtures").glob("*/README.md"))
    yield from sorted((ROOT / "fixtures").glob("test/*/README.md"))
    for top in APPS_AND_TOOLS:
        if (ROOT / top).is_dir():
            yield from sorted((ROOT / top).rglob("*.py"))
    for top in ("templates", "static"):
        for suffix in ("*.html", "*.css", "*.js"):
            yield from sorted((ROOT / top).rglob(suffix))
    yield ROOT / "Makefile"
    yield ROOT / "pyproject.toml"


def _without_replaced_names(text: str) -> str:
    """A squashed migration names the migrations it replaces, whatever they were called: those
    names are the history a database upgrades from, not narration."""
    return re.sub(r"replaces\s*=\s*\[.*?\]", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL)


def narration_found() -> list[str]:
    """Every `path:line: what (the text)` the patterns find in the scanned files."""
    found = []
    for path in _scanned_files():
        rel = path.relative_to(ROOT).as_posix()
        if not path.is_file() or path.resolve() == THIS_FILE or any(rel.startswith(s + "/") for s in SKIPPED):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "/migrations/" in f"/{rel}":
            text = _without_replaced_names(text)
        patterns = {**PATTERNS, **MARKDOWN_PATTERNS} if path.suffix == ".md" else PATTERNS
        for number, line in enumerate(text.splitlines(), 1):
            for name, pattern in patterns.items():
                if pattern.search(line):
                    found.append(f"{rel}:{number}: {name}: {line.strip()[:120]}")
    return found


def test_no_issue_numbers_or_dated_narration():
    found = narration_found()
    assert not found, f"{len(found)} line(s) narrate the work instead of the product:\n" + "\n".join(found)


def test_the_narration_patterns_catch_narration_and_pass_the_products_words():
    narration = [
        "kept for backtests queued before chunks (still served)",
        "the engine's second pass (issue 15) changed the class pull",
        "see #17 for the figures",
        "0007_i19_task_sets",
        "measured in the fifth session",
        "before the layering refactor",
        "the import used to embed every text twice",
        "## Replays, 2026-12-01",
    ]
    product = [
        "a proposal over a version that is no longer current is stale",
        "the old one is closed with a ProposalClosure that names the new one",
        "one real worker process for the test session",
        "--ink: #1d2430; --muted: #475467;",
        'f"trace #{trace.pk}"',
        "the expression is used to rank candidates",
        "[the ladder](#the-ladder)",
        "valid_from: 2026-01-01",
    ]
    every = {**PATTERNS, **MARKDOWN_PATTERNS}
    for line in narration:
        assert any(p.search(line) for p in every.values()), f"not caught: {line!r}"
    for line in product:
        caught = [name for name, p in every.items() if p.search(line)]
        assert not caught, f"{line!r} is caught as {caught}"
