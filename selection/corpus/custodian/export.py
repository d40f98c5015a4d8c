"""The MemoryCustodian layout written back from what an import kept (pure Python).

Every file is its parts in order: raw text the import kept (the manifest, the registry, preambles,
READMEs, files the manifest does not name) and units. A unit whose text and title are what the
import read is written as its raw section, byte for byte; a unit the product changed (an erasure,
a re-worded unit) is written from its title and text.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from selection.corpus.custodian.layout import LAYOUT, MC


def layout_files(layout: Mapping[str, Any], units: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """{path under docs/memory: text}; `units` maps unit id -> {"title", "text", "extras"}."""
    files: dict[str, str] = {}
    for path, parts in (layout.get(LAYOUT, layout).get("files") or {}).items():
        out: list[str] = []
        for part in parts:
            if "raw" in part:
                out.append(part["raw"])
                continue
            unit = units.get(part["unit"])
            if unit is None:
                continue  # a unit the product removed
            out.append(unit_source(unit))
        files[path] = "".join(out)
    return files


def unit_source(unit: Mapping[str, Any]) -> str:
    mc = (unit.get("extras") or {}).get(MC) or {}
    text, title = unit.get("text", ""), unit.get("title", "")
    if mc.get("source") is not None and text == mc.get("text") and _title_kept(mc, title):
        return mc["source"]
    kind = mc.get("kind")
    if kind == "file":
        return f"# {title}\n\n{text}\n"
    return f"## {title}\n\n{text}\n\n"


def _title_kept(mc: Mapping[str, Any], title: str) -> bool:
    source = mc.get("source") or ""
    first = source.splitlines()[0] if source else ""
    if mc.get("kind") == "file":
        return not first.startswith("# ") or first[2:].strip() == title or title == mc.get("file")
    if mc.get("kind") == "entry":
        return title.startswith(f"{mc.get('id')} — ") and title[len(f"{mc.get('id')} — ") :] in first
    return first[3:].strip() == title


def write_layout(target: Path, files: Mapping[str, str]) -> list[Path]:
    written = []
    for path, text in sorted(files.items()):
        out = target / "docs" / "memory" / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(text.encode("utf-8"))
        written.append(out)
    return written
