"""Small SVG charts drawn on the server: lines over time, bars per labeler, sparklines.

No JavaScript. Every chart is an ``<svg role="img">`` with a ``<title>`` and a ``<desc>``,
followed by a table of the same numbers (for screen readers, and for anyone who would
rather read the figures). Every text is escaped; colours come from CSS classes
(``series-0`` ... ``series-7`` in static/css/app.css).

Lines may coincide (a PRM pick as good as the majority vote): each series has its own dash
pattern and the earlier ones larger markers, so a line drawn over an equal one leaves it
showing in its gaps and around its markers, and the legend names the line it covers.
Intervals are drawn as whiskers, side by side where several series have them.
"""

import hashlib
import math
from collections.abc import Iterator, Sequence
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
DASHES = ("", "7 4", "2 3", "10 3 2 3")
"""Each series' dash pattern, in turn; the first is solid."""
MARKER_RADIUS, MARKER_STEP = 3.0, 1.5
"""The last series' marker radius, and how much larger each earlier series' markers are."""
WHISKER_GAP, WHISKER_CAP = 4.0, 3.0
"""Between the whiskers of series side by side, and half the width of a whisker's caps."""
BAR_HEIGHT, BAR_GAP, BAR_LABEL_WIDTH = 18, 6, 180
SPARK_WIDTH, SPARK_HEIGHT = 120, 24
FORMATS = {
    "count": "{:,.0f}",
    "rate": "{:,.1f}",
    "share": "{:.1%}",
    "score": "{:.3g}",
    "seconds": "{:,.0f} s",
}
"""How values are written on axes, in tooltips and in the tables."""


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    """One value per x label; None leaves a gap."""
    intervals: Sequence[tuple[float, float] | None] = ()
    """The (low, high) interval around each value, drawn as a whisker; None: none there."""

    def interval(self, index: int) -> tuple[float, float] | None:
        return self.intervals[index] if index < len(self.intervals) else None


def time_labels(moments: Sequence[datetime], strftime: str) -> list[str]:
    """X labels for time buckets, from their start times."""
    return [moment.strftime(strftime) for moment in moments]


def format_value(value: float | None, kind: str) -> str:
    return "—" if value is None else FORMATS[kind].format(value)


def format_interval(value: float | None, interval: tuple[float, float] | None, kind: str) -> str:
    """A value with its interval: ``0.712 [0.66, 0.75]``."""
    if value is None or interval is None:
        return format_value(value, kind)
    low, high = (format_value(end, kind) for end in interval)
    return f"{format_value(value, kind)} [{low}, {high}]"


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
    """Each line's colour and dash beside its name, and which line it hides where it has
    the same values throughout (drawn over it, it would otherwise seem missing)."""
    if len(series) < 2:
        return ""
    items = "".join(
        f'<li><svg class="legend-line" viewBox="0 0 24 8"><line class="line series-{i % COLOURS}" '
        f'x1="0" x2="24" y1="4" y2="4"{_dash(i)}/></svg>{escape(s.name)}'
        f"{_covered_note(series, i)}</li>"
        for i, s in enumerate(series)
    )
    return f'<ul class="chart-legend" aria-hidden="true">{items}</ul>'


def _covered_note(series: Sequence[Series], number: int) -> str:
    """ "(same as NAME)" for an earlier series with exactly these values, else nothing."""
    values = list(series[number].values)
    if not any(v is not None for v in values):
        return ""
    same = next((s.name for s in series[:number] if list(s.values) == values), None)
    return "" if same is None else f' <span class="legend-note">(same as {escape(same)})</span>'


def _dash(number: int) -> str:
    pattern = DASHES[number % len(DASHES)]
    return f' stroke-dasharray="{pattern}"' if pattern else ""


def _x_positions(count: int) -> list[float]:
    plot = WIDTH - LEFT - RIGHT
    if count == 1:
        return [LEFT + plot / 2]
    return [LEFT + plot * i / (count - 1) for i in range(count)]


def _y_position(value: float, top: float) -> float:
    plot = HEIGHT - TOP - BOTTOM
    return TOP + plot * (1 - value / top)


def _clipped(value: float, top: float) -> float:
    """The y position of ``value``, kept within the plot."""
    return _y_position(min(max(value, 0.0), top), top)


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
    number above the largest value (or interval end)."""
    values = [v for s in series for v in s.values if v is not None]
    values += [interval[1] for s in series for interval in s.intervals if interval]
    top = y_max if y_max is not None else nice_ceiling(max(values, default=0.0))
    if kind == "count":
        top = max(top, Y_TICKS)  # whole numbers on the axis
    xs = _x_positions(len(x_labels)) if x_labels else []
    parts = [
        _svg_open(_chart_id(title), title, description, WIDTH, HEIGHT),
        *_axes(xs, x_labels, top, kind),
    ]
    # Whiskers under the lines, markers (with their tooltips) over every line.
    with_intervals = [number for number, line in enumerate(series) if any(line.intervals)]
    for place, number in enumerate(with_intervals):
        offset = WHISKER_GAP * (place - (len(with_intervals) - 1) / 2)
        parts.extend(_whiskers(series[number], number, xs, x_labels, top, kind, offset))
    for number, line in enumerate(series):
        parts.extend(_polylines(line, number, xs, top))
    if len(xs) <= MAX_MARKERS:
        for number, line in enumerate(series):
            radius = MARKER_RADIUS + MARKER_STEP * (len(series) - 1 - number)
            parts.extend(_markers(line, number, xs, x_labels, top, kind, radius))
    parts.append("</svg>")
    rows = [
        [label, *(format_interval(_value(s, i), s.interval(i), kind) for s in series)]
        for i, label in enumerate(x_labels)
    ]
    table = _data_table(title, ["", *(s.name for s in series)], rows)
    return Markup(f'<figure class="chart">{"".join(parts)}{_legend(series)}{table}</figure>')


def _value(line: Series, index: int) -> float | None:
    return line.values[index] if index < len(line.values) else None


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
    last = len(x_labels) - 1
    for index in _tick_indices(len(x_labels)):
        # The last label ends at its point: centred there, it would run off the chart.
        anchor = "end" if index == last > 0 else "middle"
        parts.append(
            f'<text class="axis" x="{xs[index]:.1f}" y="{HEIGHT - 6}" text-anchor="{anchor}">'
            f"{escape(x_labels[index])}</text>"
        )
    return parts


def _colour(number: int) -> str:
    return f"series-{number % COLOURS}"


def _polylines(line: Series, number: int, xs: Sequence[float], top: float) -> list[str]:
    """One series' line, broken where a value is missing."""
    points = [
        (x, None if v is None else _clipped(v, top)) for x, v in zip(xs, line.values, strict=False)
    ]
    return [
        f'<polyline class="line {_colour(number)}"{_dash(number)} points="'
        + " ".join(f"{x:.1f},{y:.1f}" for x, y in segment)
        + '"/>'
        for segment in _segments(points)
    ]


def _points(
    line: Series, xs: Sequence[float], x_labels: Sequence[str]
) -> Iterator[tuple[float, str, float | None, tuple[float, float] | None]]:
    """Each x position of a series, with its label, value and interval."""
    for index, (x, label) in enumerate(zip(xs, x_labels, strict=False)):
        yield x, label, _value(line, index), line.interval(index)


def _markers(
    line: Series,
    number: int,
    xs: Sequence[float],
    x_labels: Sequence[str],
    top: float,
    kind: str,
    radius: float,
) -> list[str]:
    """A marker per value, with a tooltip."""
    return [
        f'<circle class="marker {_colour(number)}" cx="{x:.1f}" '
        f'cy="{_clipped(value, top):.1f}" r="{radius:g}">'
        f"<title>{escape(f'{line.name}, {label}: {format_interval(value, interval, kind)}')}"
        "</title></circle>"
        for x, label, value, interval in _points(line, xs, x_labels)
        if value is not None
    ]


def _whiskers(
    line: Series,
    number: int,
    xs: Sequence[float],
    x_labels: Sequence[str],
    top: float,
    kind: str,
    offset: float,
) -> list[str]:
    """A vertical bar with caps from each interval's low to its high, ``offset`` aside."""
    parts = []
    for x, label, _, interval in _points(line, xs, x_labels):
        if interval is None:
            continue
        low, high = (_clipped(end, top) for end in interval)
        at, cap = x + offset, 2 * WHISKER_CAP
        ends = " to ".join(format_value(end, kind) for end in interval)
        parts.append(
            f'<path class="interval {_colour(number)}" d="M{at:.1f} {low:.1f}V{high:.1f}'
            f'M{at - WHISKER_CAP:.1f} {low:.1f}h{cap:g}M{at - WHISKER_CAP:.1f} {high:.1f}h{cap:g}">'
            f"<title>{escape(f'{line.name}, {label}: 95% interval {ends}')}</title></path>"
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
