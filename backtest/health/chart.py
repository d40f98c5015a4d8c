"""A metric over time as server-rendered inline SVG: pure (values in, escaped markup out), no JS.

The strict CSP allows no script, so a chart is an <svg role="img"> with a <title> and a <desc>
that say what it shows; each point has its own <title> (the browser's tooltip), a failing
reading is drawn as a larger diamond, not only in another colour, and the page puts a table of
the same readings beside it. The viewBox is sized for a phone and scales up: the page lays the
charts out in a grid of columns at least 300 px wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from rules.gate_verdict import fmt

WIDTH, HEIGHT = 420, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 14, 16, 36


@dataclass(frozen=True)
class Point:
    at: datetime
    value: float
    passed: bool  # the reading's verdict on this chart's gates
    label: str  # what the point's tooltip says besides the value: "v3, task set v2, import"


@dataclass(frozen=True)
class Line:
    value: float
    label: str  # "max 0", "first reading"


def _range(values: Sequence[float]) -> tuple[float, float]:
    """The axis: the values padded; a rate (every value within 0..1) stays within 0..1."""
    low, high = min(values), max(values)
    pad = (high - low) * 0.12 if high - low >= 1e-9 else (abs(high) * 0.1 or 0.05)
    a, b = low - pad, high + pad
    if 0.0 <= low and high <= 1.0:
        a, b = max(a, 0.0), min(b, 1.0)
        if b - a < 1e-9:  # every value at 0 or at 1: keep a visible band inside the range
            a, b = (0.0, 0.1) if low <= 0.0 else (0.9, 1.0)
    return a, b


def _attr(value) -> str:
    return escape(str(value), quote=True)


def line_chart(
    *, chart_id: str, title: str, description: str, points: Sequence[Point], lines: Sequence[Line] = ()
) -> str:
    """One metric's readings in time order as an SVG line with its limit lines; "" without points."""
    if not points:
        return ""
    values = [p.value for p in points] + [line.value for line in lines]
    low, high = _range(values)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    first, last = points[0].at, points[-1].at
    span = (last - first).total_seconds()

    def x(at: datetime, i: int) -> float:
        if len(points) == 1:
            return LEFT + plot_w / 2
        share = (at - first).total_seconds() / span if span > 0 else i / (len(points) - 1)
        return LEFT + share * plot_w

    def y(value: float) -> float:
        return TOP + (high - value) / (high - low) * plot_h

    parts = [
        f'<svg class="health-chart" id="{_attr(chart_id)}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="{_attr(chart_id)}-title {_attr(chart_id)}-desc" preserveAspectRatio="xMidYMid meet">',
        f'<title id="{_attr(chart_id)}-title">{escape(title)}</title>',
        f'<desc id="{_attr(chart_id)}-desc">{escape(description)}</desc>',
        f'<rect class="plot" x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}"/>',
    ]
    for tick in (high, (high + low) / 2, low):
        ty = y(tick)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{ty:.1f}" y2="{ty:.1f}"/>')
        parts.append(
            f'<text class="tick" x="{LEFT - 6}" y="{ty + 4:.1f}" text-anchor="end">{escape(fmt(tick))}</text>'
        )
    base = HEIGHT - 10
    parts.append(f'<text class="tick" x="{LEFT}" y="{base}" text-anchor="start">{first:%b %d}</text>')
    if len(points) > 1:
        parts.append(f'<text class="tick" x="{LEFT + plot_w}" y="{base}" text-anchor="end">{last:%b %d}</text>')
    for line in lines:
        ly = y(line.value)
        parts.append(f'<line class="limit" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{ly:.1f}" y2="{ly:.1f}"/>')
        parts.append(
            f'<text class="limit-label" x="{LEFT + plot_w - 4}" y="{ly - 4:.1f}" '
            f'text-anchor="end">{escape(line.label)}</text>'
        )
    coords = [(x(p.at, i), y(p.value)) for i, p in enumerate(points)]
    if len(coords) > 1:
        path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)
        parts.append(f'<polyline class="series" points="{path}"/>')
    for p, (cx, cy) in zip(points, coords, strict=True):
        verdict = "" if p.passed else " — fails its gate"
        tip = f"{p.at:%Y-%m-%d %H:%M} UTC: {fmt(p.value)} ({p.label}){verdict}"
        if p.passed:
            parts.append(
                f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="4"><title>{escape(tip)}</title></circle>'
            )
        else:
            d = 7
            diamond = f"{cx:.1f},{cy - d:.1f} {cx + d:.1f},{cy:.1f} {cx:.1f},{cy + d:.1f} {cx - d:.1f},{cy:.1f}"
            parts.append(
                f'<polygon class="point failing" points="{diamond}"><title>{escape(tip)}</title></polygon>'
            )
    parts.append("</svg>")
    return "".join(parts)
