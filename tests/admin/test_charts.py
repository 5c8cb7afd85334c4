"""The SVG charts: accessible names, escaped text, a table of the figures, and geometry."""

import re
import xml.etree.ElementTree as ElementTree

import pytest

from app.admin import charts
from app.admin.charts import Series, bar_chart, line_chart, nice_ceiling, sparkline

HOSTILE = '<script>alert("x")</script> & co'


def parse(markup: str) -> ElementTree.Element:
    """The chart as XML: fails on anything unescaped or unbalanced."""
    return ElementTree.fromstring(markup)


def points(svg: ElementTree.Element) -> list[list[tuple[float, float]]]:
    return [
        [tuple(map(float, pair.split(","))) for pair in line.attrib["points"].split()]  # type: ignore[misc]
        for line in svg.iter("polyline")
    ]


@pytest.mark.parametrize(
    ("value", "ceiling"), [(0, 1), (0.3, 0.5), (1, 1), (7, 10), (12, 20), (24, 25), (260, 500)]
)
def test_nice_ceiling(value: float, ceiling: float) -> None:
    assert nice_ceiling(value) == pytest.approx(ceiling)


def test_line_chart_is_labelled_escaped_and_tabulated() -> None:
    markup = line_chart(
        HOSTILE,
        "A description & more",
        ["09:00", "10:00", "11:00"],
        [Series(HOSTILE, [1.0, None, 3.0]), Series("b", [2.0, 2.0, 2.0])],
        kind="rate",
    )
    assert "<script>" not in markup
    figure = parse(markup)
    svg = figure.find("svg")
    assert svg is not None and svg.attrib["role"] == "img"
    title, desc = svg.find("title"), svg.find("desc")
    assert title is not None and title.text == HOSTILE
    assert desc is not None and desc.text == "A description & more"
    assert svg.attrib["aria-labelledby"] == f"{title.attrib['id']} {desc.attrib['id']}"
    rows = [[cell.text for cell in row] for row in figure.iter("tr") if row.find("td") is not None]
    assert rows == [["09:00", "1.0", "2.0"], ["10:00", "—", "2.0"], ["11:00", "3.0", "2.0"]]
    legend = [item.itertext() for item in figure.iter("li")]
    assert ["".join(text) for text in legend] == [HOSTILE, "b"]


def test_line_chart_geometry() -> None:
    svg = parse(line_chart("t", "d", ["a", "b", "c"], [Series("s", [0.0, None, 8.0])]))
    # A gap splits the line; 0 sits on the bottom of the plot, 8 at 8/10 of its height.
    (first,), (last,) = points(svg)
    bottom = charts.HEIGHT - charts.BOTTOM
    assert first == (charts.LEFT, bottom)
    assert last == pytest.approx(
        (charts.WIDTH - charts.RIGHT, bottom - 0.8 * (bottom - charts.TOP)), abs=0.05
    )
    y_axis = [t.text for t in svg.iter("text") if float(t.attrib["x"]) < charts.LEFT]
    assert y_axis == ["0", "2", "4", "6", "8", "10"]


def test_values_above_a_fixed_maximum_are_clipped_to_it() -> None:
    svg = parse(line_chart("t", "d", ["a", "b"], [Series("s", [0.5, 1.5])], kind="share", y_max=1))
    ((_, clipped),) = points(svg)
    assert clipped[1] == charts.TOP


def test_bar_chart_bars_scale_with_their_values() -> None:
    markup = bar_chart("Per hour", "d", [("ann", 10.0), (HOSTILE, 5.0), ("cid", None)])
    assert "<script>" not in markup
    figure = parse(markup)
    widths = [float(rect.attrib["width"]) for rect in figure.iter("rect")]
    assert widths[0] == pytest.approx(2 * widths[1]) and widths[2] == 0
    cells = [cell.text for cell in figure.iter("td")]
    assert cells == ["10", "5", "—"]


def test_sparkline_has_an_accessible_name() -> None:
    svg = parse(sparkline([0.0, 2.0, 1.0], f"{HOSTILE}: 3 labels"))
    assert svg.attrib["aria-label"] == f"{HOSTILE}: 3 labels"
    ((low, high, middle),) = points(svg)
    assert high[1] < middle[1] < low[1]


def test_format_value() -> None:
    assert charts.format_value(0.875, "share") == "87.5%"
    assert charts.format_value(1234, "count") == "1,234"
    assert charts.format_value(None, "rate") == "—"
    assert re.fullmatch(r"\d+ s", charts.format_value(61.4, "seconds"))


def test_equal_lines_both_show() -> None:
    equal = [0.5, 0.625, 0.625]
    figure = parse(
        line_chart(
            "t",
            "d",
            ["1", "2", "3"],
            [Series("PRM pick", equal), Series("Majority vote", equal)],
            kind="share",
            y_max=1,
        )
    )
    under, over = figure.iter("polyline")
    assert under.attrib["points"] == over.attrib["points"]
    # The line drawn last has gaps, through which the solid one under it shows.
    assert "stroke-dasharray" not in under.attrib
    assert [float(length) for length in over.attrib["stroke-dasharray"].split()][1] > 0
    # Where their markers coincide, the earlier one is larger: a ring around the later one.
    markers: dict[tuple[str, str], list[float]] = {}
    for circle in figure.iter("circle"):
        markers.setdefault((circle.attrib["cx"], circle.attrib["cy"]), []).append(
            float(circle.attrib["r"])
        )
    assert len(markers) == 3
    assert all(first > second for first, second in markers.values())
    # The legend draws each line with its own pattern.
    legend = [line.attrib.get("stroke-dasharray") for line in figure.iter("line")][-2:]
    assert legend == [None, over.attrib["stroke-dasharray"]]


def test_intervals_are_whiskers_side_by_side_and_in_the_table() -> None:
    figure = parse(
        line_chart(
            "t",
            "d",
            ["1", "2"],
            [
                Series("a", [0.5, 0.6], intervals=[(0.4, 0.6), None]),
                Series("b", [0.5, None], intervals=[(0.3, 0.7)]),
            ],
            kind="score",
            y_max=1,
        )
    )
    whiskers = [path.attrib["d"] for path in figure.iter("path")]
    assert len(whiskers) == 2
    starts = [tuple(map(float, re.findall(r"[\d.]+", d)[:3])) for d in whiskers]
    (x_a, low_a, high_a), (x_b, low_b, high_b) = starts
    bottom, plot = charts.HEIGHT - charts.BOTTOM, charts.HEIGHT - charts.BOTTOM - charts.TOP
    assert (low_a, high_a) == pytest.approx((bottom - 0.4 * plot, bottom - 0.6 * plot), abs=0.05)
    assert (low_b, high_b) == pytest.approx((bottom - 0.3 * plot, bottom - 0.7 * plot), abs=0.05)
    assert x_b - x_a == charts.WHISKER_GAP  # side by side around the run's x
    rows = [[cell.text for cell in row] for row in figure.iter("tr") if row.find("td") is not None]
    assert rows == [["1", "0.5 [0.4, 0.6]", "0.5 [0.3, 0.7]"], ["2", "0.6", "—"]]


def test_the_last_x_label_ends_at_its_point_inside_the_chart() -> None:
    labels = [f"Wed {hour:02d}:00" for hour in range(24)]
    svg = parse(line_chart("t", "d", labels, [Series("s", [1.0] * 24)]))
    x_axis = [t for t in svg.iter("text") if t.text in labels]
    assert [t.attrib["text-anchor"] for t in x_axis[:-1]] == ["middle"] * (len(x_axis) - 1)
    assert x_axis[-1].text == "Wed 23:00" and x_axis[-1].attrib["text-anchor"] == "end"
    assert float(x_axis[-1].attrib["x"]) == charts.WIDTH - charts.RIGHT


def test_the_legend_names_the_line_an_equal_one_covers() -> None:
    equal = [0.5, 0.625]
    figure = parse(
        line_chart(
            "t",
            "d",
            ["1", "2"],
            [
                Series("PRM pick", equal),
                Series("Majority vote", equal),
                Series("Random", [0.5, 0.6]),
            ],
            kind="share",
        )
    )
    items = ["".join(item.itertext()) for item in figure.iter("li")]
    assert items == ["PRM pick", "Majority vote (same as PRM pick)", "Random"]
