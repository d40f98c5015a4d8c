"""The part of Markdown the MemoryCustodian layout relies on: which lines are visible structure.

A line inside a fenced code block (``` or ~~~), inside an HTML comment, or indented as code
(four spaces or a tab) is text, never a heading or a field. `segments` cuts a file into its
preamble and its H2 sections as raw slices, so that joining the slices gives the file back byte
for byte (an export relies on it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


@dataclass(frozen=True)
class Line:
    number: int  # 1-based
    text: str  # without its line ending
    code: bool = False  # inside a fence or an HTML comment
    fence: str = ""  # the opening fence's info string when the line opens a fence
    indented: bool = False  # four spaces or a tab: code at the top level, never a heading


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    number: int


@dataclass(frozen=True)
class Segment:
    """A raw slice of a file: the preamble (heading None) or one H2 section."""

    heading: str | None  # the H2 title as written
    number: int  # line of the heading (1 for the preamble)
    raw: str  # exact bytes, line endings included


def scan(text: str) -> list[Line]:
    """Every line with whether it is code (or comment) rather than Markdown structure."""
    lines: list[Line] = []
    fence: str | None = None
    comment = False
    for number, raw in enumerate(text.splitlines(), start=1):
        if fence is not None:
            closing = _FENCE.match(raw)
            if (
                closing
                and closing.group(1)[0] == fence[0]
                and len(closing.group(1)) >= len(fence)
                and not closing.group(2).strip()
            ):
                fence = None
            lines.append(Line(number, raw, code=True))
            continue
        if comment:
            if "-->" in raw:
                comment = False
            lines.append(Line(number, raw, code=True))
            continue
        opening = _FENCE.match(raw)
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence = opening.group(1)
            lines.append(Line(number, raw, code=True, fence=opening.group(2).strip() or "-"))
            continue
        stripped = raw.lstrip()
        if stripped.startswith("<!--") and "-->" not in stripped[4:]:
            comment = True
            lines.append(Line(number, raw, code=True))
            continue
        if stripped.startswith("<!--"):
            lines.append(Line(number, raw, code=True))
            continue
        lines.append(Line(number, raw, indented=raw.startswith(("    ", "\t")) and bool(raw.strip())))
    return lines


def unclosed_fence(text: str) -> int | None:
    """The line of a fence that never closes (None when every fence closes)."""
    opened: int | None = None
    fence: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(raw)
        if fence is None:
            if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                fence, opened = match.group(1), number
        elif (
            match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) and not match.group(2).strip()
        ):
            fence, opened = None, None
    return opened


def heading(line: Line) -> Heading | None:
    if line.code or line.indented:
        return None
    match = _ATX.match(line.text)
    if match is None:
        return None
    return Heading(len(match.group(1)), (match.group(2) or "").strip(), line.number)


def headings(lines: list[Line]) -> list[Heading]:
    return [h for h in (heading(line) for line in lines) if h is not None]


def segments(text: str) -> list[Segment]:
    """The preamble (possibly empty) and one segment per visible H2, as exact raw slices."""
    lines = scan(text)
    starts = [
        (h.number, h.title) for h in headings(lines) if h.level == 2 and lines[h.number - 1].text.startswith("## ")
    ]
    raw_lines = text.splitlines(keepends=True)
    cut = [0] + [number - 1 for number, _ in starts] + [len(raw_lines)]
    titles: list[str | None] = [None] + [title for _, title in starts]
    out: list[Segment] = []
    for index, title in enumerate(titles):
        begin, end = cut[index], cut[index + 1]
        out.append(Segment(title, begin + 1, "".join(raw_lines[begin:end])))
    return out
