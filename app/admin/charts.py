"""Small SVG charts drawn on the server: lines over time, bars per labeler, sparklines.

No JavaScript. Every chart is an ``<svg role="img">`` with a ``<title>`` and a ``<desc>``,
followed by a table of the same numbers (for screen readers, and for anyone who would
rather read the figures). Every text is escaped; colours come from CSS classes
(``series-0`` ... ``series-7`` in static/css/app.css).
"""

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from markupsafe import Markup, escape

WIDTH, HEIGHT = 640, 200
TOP, RIGHT, BOTTOM, LEFT = 12, 16, 26, 56
COLOURS = 8
"""Series colours; more series than this reuse them."""
X_TICKS = 6
Y_TICKS = 5
"""Fifths of a nice ceiling (1, 2, 2.5 or 5 times a power of ten) are round numbers too."""
MAX_MARKERS = 60
"""Up to this many points per series get a marker with a tooltip."""
BAR_HEIGHT, BAR_GAP, BAR_LABEL_WIDTH = 18, 6, 180
SPARK_WIDTH, SPARK_HEIGHT = 120, 24
FORMATS = {
    "count": "{:,.0f}",
    "rate": "{:,.1f}",
    "share": "{:.1%}",
    "seconds": "{:,.0f} s",
}
"""How values are written on axes, in tooltips and in the tables."""


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    """One value per x label; None leaves a gap."""


def time_labels(moments: Sequence[datetime], strftime: str) -> list[str]:
    """X labels for time buckets, from their start times."""
    return [moment.strftime(strftime) for moment in moments]


def format_value(value: float | None, kind: str) -> str:
    return "—" if value is None else FORMATS[kind].format(value)


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``value`` (> 0)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value)


def _chart_id(title: str) -> str:
    return "chart-" + hashlib.sha1(title.encode()).hexdigest()[:8]


def _svg_open(chart_id: str, title: str, description: str, width: int, height: int) -> str:
    return (
        f'<svg class="chart-svg" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{chart_id}-title {chart_id}-desc" preserveAspectRatio="xMinYMin meet">'
        f'<title id="{chart_id}-title">{escape(title)}</title>'
        f'<desc id="{chart_id}-desc">{escape(description)}</desc>'
    )


def _data_table(caption: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f'<th scope="col">{escape(cell)}</th>' for cell in header)
    body = "".join(
        f'<tr><th scope="row">{escape(row[0])}</th>'
        + "".join(f'<td class="num">{escape(cell)}</td>' for cell in row[1:])
        + "</tr>"
        for row in rows
    )
    return (
        '<details class="chart-data"><summary>Table</summary>'
        f"<table><caption>{escape(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table></details>"
    )


def _legend(series: Sequence[Series]) -> str:
    if len(series) < 2:
        return ""
    items = "".join(
        f'<li><span class="swatch series-{i % COLOURS}"></span>{escape(s.name)}</li>'
        for i, s in enumerate(series)
    )
    return f'<ul class="chart-legend" aria-hidden="true">{items}</ul>'


def _x_positions(count: int) -> list[float]:
    plot = WIDTH - LEFT - RIGHT
    if count == 1:
        return [LEFT + plot / 2]
    return [LEFT + plot * i / (count - 1) for i in range(count)]


def _y_position(value: float, top: float) -> float:
    plot = HEIGHT - TOP - BOTTOM
    return TOP + plot * (1 - value / top)


def _tick_indices(count: int) -> list[int]:
    if count <= X_TICKS:
        return list(range(count))
    step = (count - 1) / (X_TICKS - 1)
    return sorted({round(i * step) for i in range(X_TICKS)})


def _segments(points: Sequence[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    """Runs of consecutive points with a value: a None breaks the line."""
    segments: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None:
            segments.append([])
        else:
            segments[-1].append((x, y))
    return [segment for segment in segments if segment]


def line_chart(
    title: str,
    description: str,
    x_labels: Sequence[str],
    series: Sequence[Series],
    *,
    kind: str = "count",
    y_max: float | None = None,
) -> Markup:
    """Lines over shared x labels (times, runs), from zero up to ``y_max`` or a round
    number above the largest value."""
    values = [v for s in series for v in s.values if v is not None]
    top = y_max if y_max is not None else nice_ceiling(max(values, default=0.0))
    if kind == "count":
        top = max(top, Y_TICKS)  # whole numbers on the axis
    xs = _x_positions(len(x_labels)) if x_labels else []
    parts = [
        _svg_open(_chart_id(title), title, description, WIDTH, HEIGHT),
        *_axes(xs, x_labels, top, kind),
    ]
    for number, line in enumerate(series):
        parts.extend(_line(line, f"series-{number % COLOURS}", xs, x_labels, top, kind))
    parts.append("</svg>")
    rows = [
        [label, *(format_value(s.values[i] if i < len(s.values) else None, kind) for s in series)]
        for i, label in enumerate(x_labels)
    ]
    table = _data_table(title, ["", *(s.name for s in series)], rows)
    return Markup(f'<figure class="chart">{"".join(parts)}{_legend(series)}{table}</figure>')


def _axes(xs: Sequence[float], x_labels: Sequence[str], top: float, kind: str) -> list[str]:
    """Horizontal grid lines with their values, and a few of the x labels."""
    parts = []
    for tick in range(Y_TICKS + 1):
        value = top * tick / Y_TICKS
        y = _y_position(value, top)
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(format_value(value, kind))}</text>"
        )
    for index in _tick_indices(len(x_labels)):
        parts.append(
            f'<text class="axis" x="{xs[index]:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
            f"{escape(x_labels[index])}</text>"
        )
    return parts


def _line(
    line: Series,
    colour: str,
    xs: Sequence[float],
    x_labels: Sequence[str],
    top: float,
    kind: str,
) -> list[str]:
    """One series: its polylines, and markers with a tooltip where there are few points."""
    points = [
        (x, None if v is None else _y_position(min(v, top), top))
        for x, v in zip(xs, line.values, strict=False)
    ]
    parts = [
        f'<polyline class="line {colour}" points="'
        + " ".join(f"{x:.1f},{y:.1f}" for x, y in segment)
        + '"/>'
        for segment in _segments(points)
    ]
    if len(xs) > MAX_MARKERS:
        return parts
    for (x, y), label, value in zip(points, x_labels, line.values, strict=False):
        if y is not None:
            tip = f"{line.name}, {label}: {format_value(value, kind)}"
            parts.append(
                f'<circle class="marker {colour}" cx="{x:.1f}" cy="{y:.1f}" r="3">'
                f"<title>{escape(tip)}</title></circle>"
            )
    return parts


def bar_chart(
    title: str,
    description: str,
    bars: Sequence[tuple[str, float | None]],
    *,
    kind: str = "count",
    x_max: float | None = None,
) -> Markup:
    """Horizontal bars, one per (label, value), in the order given."""
    top = x_max if x_max is not None else nice_ceiling(max((v or 0.0 for _, v in bars), default=0))
    chart_id = _chart_id(title)
    height = max(len(bars), 1) * (BAR_HEIGHT + BAR_GAP) + BAR_GAP
    plot = WIDTH - BAR_LABEL_WIDTH - RIGHT - 60
    parts = [_svg_open(chart_id, title, description, WIDTH, height)]
    for index, (label, value) in enumerate(bars):
        y = BAR_GAP + index * (BAR_HEIGHT + BAR_GAP)
        length = 0.0 if value is None else plot * min(value, top) / top
        text = format_value(value, kind)
        parts.append(
            f"<g><title>{escape(f'{label}: {text}')}</title>"
            f'<text class="axis" x="{BAR_LABEL_WIDTH - 8}" y="{y + BAR_HEIGHT - 5}" '
            f'text-anchor="end">{escape(_shorten(label))}</text>'
            f'<rect class="bar series-0" x="{BAR_LABEL_WIDTH}" y="{y}" '
            f'width="{length:.1f}" height="{BAR_HEIGHT}"/>'
            f'<text class="value" x="{BAR_LABEL_WIDTH + length + 6:.1f}" '
            f'y="{y + BAR_HEIGHT - 5}">{escape(text)}</text></g>'
        )
    parts.append("</svg>")
    table = _data_table(title, ["", title], [[label, format_value(v, kind)] for label, v in bars])
    return Markup(f'<figure class="chart">{"".join(parts)}{table}</figure>')


def bars(items: Sequence[object], label: str, value: str) -> list[tuple[str, float | None]]:
    """(label, value) pairs for ``bar_chart`` from two attributes of each item."""
    return [(str(getattr(item, label)), getattr(item, value)) for item in items]


def _shorten(label: str, limit: int = 24) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def sparkline(values: Sequence[float], description: str, *, y_max: float | None = None) -> Markup:
    """A tiny line without axes, for a table cell; ``description`` is its accessible name."""
    top = y_max or max(values, default=0.0) or 1.0
    step = SPARK_WIDTH / max(len(values) - 1, 1)
    coordinates = " ".join(
        f"{i * step:.1f},{SPARK_HEIGHT - 2 - (SPARK_HEIGHT - 4) * min(v, top) / top:.1f}"
        for i, v in enumerate(values)
    )
    return Markup(
        f'<svg class="sparkline" viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}" role="img" '
        f'aria-label="{escape(description)}"><title>{escape(description)}</title>'
        f'<polyline class="line series-0" points="{coordinates}"/></svg>'
    )
