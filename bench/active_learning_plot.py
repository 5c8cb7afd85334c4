"""bench/active_learning.py's SVG plots: each figure against labels, and (bon32) each arm's
ratio against samples per problem.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from bench.active_learning_ratio import FIGURES
from bench.active_learning_report import PRIMARY_FIGURES

COLORS = {
    "uniform": "#555555",
    "convincing_wrong": "#d62728",
    "random_wrong": "#1f77b4",
    "uncertain": "#2ca02c",
    "disagreement": "#9467bd",
    "ensemble": "#ff7f0e",
    "convincing_uncertain": "#8c564b",
    "diverse": "#17becf",
}
PANEL_WIDTH, PANEL_HEIGHT, MARGIN = 420, 300, 50


def svg_plot(rows: list[dict[str, Any]], sizes: Sequence[int]) -> str:
    """Each figure against labels (log scale), a line and a 95% band per strategy."""
    seed_row = rows[0]
    strategies = list(dict.fromkeys(r["strategy"] for r in rows[1:]))
    panels = [
        _panel(
            title,
            figure,
            {s: [seed_row, *(r for r in rows[1:] if r["strategy"] == s)] for s in strategies},
            sizes,
            index * (PANEL_WIDTH + MARGIN),
        )
        for index, (figure, title) in enumerate(FIGURES.items())
    ]
    legend = [
        f'<text x="{MARGIN + 10}" y="{PANEL_HEIGHT + 2 * MARGIN + 16 * k}" '
        f'fill="{COLORS.get(s, "#000")}" font-size="12">{s}</text>'
        for k, s in enumerate(strategies)
    ]
    width = 2 * (PANEL_WIDTH + MARGIN) + MARGIN
    height = PANEL_HEIGHT + 2 * MARGIN + 16 * len(strategies) + 10
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            'font-family="sans-serif">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            *panels,
            *legend,
            "</svg>",
            "",
        ]
    )


def _panel(
    title: str,
    figure: str,
    curves: dict[str, list[dict[str, Any]]],
    sizes: Sequence[int],
    left: int,
) -> str:
    points = [r[figure] for c in curves.values() for r in c if r[figure].get("status") == "ok"]
    if not points:
        return ""
    bottom = float(min(p["low"] for p in points))
    top = float(max(p["high"] for p in points))
    span = (top - bottom) or 1.0

    def x(labels: float) -> float:
        share = math.log(labels / sizes[0]) / math.log(sizes[-1] / sizes[0])
        return left + MARGIN + share * PANEL_WIDTH

    def y(value: float) -> float:
        return MARGIN + (1 - (value - bottom) / span) * PANEL_HEIGHT

    parts = [
        f'<text x="{left + MARGIN}" y="{MARGIN - 20}" font-size="14">{title} (test)</text>',
        f'<rect x="{left + MARGIN}" y="{MARGIN}" width="{PANEL_WIDTH}" '
        f'height="{PANEL_HEIGHT}" fill="none" stroke="#999"/>',
    ]
    for labels in sizes:
        parts.append(
            f'<text x="{x(labels):.1f}" y="{MARGIN + PANEL_HEIGHT + 15}" font-size="10" '
            f'text-anchor="middle">{labels}</text>'
        )
    for k in range(5):
        value = bottom + span * k / 4
        parts.append(
            f'<text x="{left + MARGIN - 4}" y="{y(value) + 3:.1f}" font-size="10" '
            f'text-anchor="end">{value:.3f}</text>'
        )
    for strategy, rows in curves.items():
        shown = [(r["labels"], r[figure]) for r in rows if r[figure].get("status") == "ok"]
        color = COLORS.get(strategy, "#000")
        band = [(x(n), y(e["high"])) for n, e in shown] + [
            (x(n), y(e["low"])) for n, e in reversed(shown)
        ]
        line = [(x(n), y(e["value"])) for n, e in shown]
        parts.append(f'<polygon points="{_points(band)}" fill="{color}" fill-opacity="0.08"/>')
        parts.append(
            f'<polyline points="{_points(line)}" fill="none" stroke="{color}" stroke-width="2"/>'
        )
    parts.append(
        f'<text x="{left + MARGIN + PANEL_WIDTH / 2}" y="{MARGIN + PANEL_HEIGHT + 32}" '
        'font-size="11" text-anchor="middle">labeled solutions (log scale)</text>'
    )
    return "\n".join(parts)


def svg_ratio_by_samples(rows: list[dict[str, Any]]) -> str:
    """bon32's plot: each arm's ratio (uniform's labels per label) against samples per
    problem, log-log, one panel per figure and primary budget, 95% intervals as bars."""
    samples = sorted({r["samples"] for r in rows})
    budgets = sorted({r["labels"] for r in rows if r.get("primary")})
    arms_shown = list(dict.fromkeys(r["arm"] for r in rows if "arm" in r))
    panels = [
        _ratio_panel(rows, figure, budget, samples, arms_shown, k * (PANEL_WIDTH + MARGIN))
        for k, (figure, budget) in enumerate((f, b) for f in PRIMARY_FIGURES for b in budgets)
    ]
    legend = [
        f'<text x="{MARGIN + 10 + 220 * (k % 4)}" y="{PANEL_HEIGHT + 2 * MARGIN + 16 * (k // 4)}" '
        f'fill="{_arm_color(a)}" font-size="12">{a}{" (dashed)" if a.endswith("fixed") else ""}'
        "</text>"
        for k, a in enumerate(arms_shown)
    ]
    width = len(panels) * (PANEL_WIDTH + MARGIN) + MARGIN
    height = PANEL_HEIGHT + 2 * MARGIN + 16 * (len(arms_shown) // 4 + 1) + 10
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            'font-family="sans-serif">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            *panels,
            *legend,
            "</svg>",
            "",
        ]
    )


def _arm_color(arm: str) -> str:
    return COLORS.get(arm.removesuffix(", fixed"), "#000")


def _ratio_panel(
    rows: list[dict[str, Any]],
    figure: str,
    budget: int,
    samples: list[int],
    arms_shown: list[str],
    left: int,
) -> str:
    shown = [
        r
        for r in rows
        if r["labels"] == budget and "arm" in r and r["ratio"].get(figure, {}).get("status") == "ok"
    ]
    if not shown:
        return ""
    values = [v for r in shown for v in (r["ratio"][figure]["low"], r["ratio"][figure]["high"])]
    bottom, top = math.log(min(min(values), 0.5)), math.log(max(max(values), 2.0))

    def x(n: int) -> float:
        share = (
            0.5
            if len(samples) < 2
            else math.log(n / samples[0]) / math.log(samples[-1] / samples[0])
        )
        return left + MARGIN + 20 + share * (PANEL_WIDTH - 40)

    def y(ratio: float) -> float:
        return MARGIN + (1 - (math.log(ratio) - bottom) / (top - bottom)) * PANEL_HEIGHT

    parts = [
        f'<text x="{left + MARGIN}" y="{MARGIN - 20}" font-size="14">'
        f"{FIGURES[figure]}: uniform's labels per label at {budget}</text>",
        f'<rect x="{left + MARGIN}" y="{MARGIN}" width="{PANEL_WIDTH}" '
        f'height="{PANEL_HEIGHT}" fill="none" stroke="#999"/>',
    ]
    for ratio in (0.5, 1.0, 2.0):
        parts.append(
            f'<line x1="{left + MARGIN}" x2="{left + MARGIN + PANEL_WIDTH}" y1="{y(ratio):.1f}" '
            f'y2="{y(ratio):.1f}" stroke="#bbb" '
            f'stroke-dasharray="{"none" if ratio == 1 else "3,3"}"/>'
            f'<text x="{left + MARGIN - 4}" y="{y(ratio) + 3:.1f}" font-size="10" '
            f'text-anchor="end">{ratio:g}</text>'
        )
    for n in samples:
        parts.append(
            f'<text x="{x(n):.1f}" y="{MARGIN + PANEL_HEIGHT + 15}" font-size="10" '
            f'text-anchor="middle">{n}</text>'
        )
    for k, arm in enumerate(arms_shown):
        points = sorted((r["samples"], r["ratio"][figure]) for r in shown if r["arm"] == arm)
        if not points:
            continue
        color, nudge = _arm_color(arm), (k - len(arms_shown) / 2) * 2.0
        dash = ' stroke-dasharray="5,3"' if arm.endswith("fixed") else ""
        line = [(x(n) + nudge, y(e["value"])) for n, e in points]
        parts.append(
            f'<polyline points="{_points(line)}" fill="none" stroke="{color}" '
            f'stroke-width="1.5"{dash}/>'
        )
        for n, e in points:
            parts.append(
                f'<line x1="{x(n) + nudge:.1f}" x2="{x(n) + nudge:.1f}" y1="{y(e["low"]):.1f}" '
                f'y2="{y(e["high"]):.1f}" stroke="{color}" stroke-opacity="0.6"/>'
            )
    parts.append(
        f'<text x="{left + MARGIN + PANEL_WIDTH / 2}" y="{MARGIN + PANEL_HEIGHT + 32}" '
        'font-size="11" text-anchor="middle">samples per problem (log scale)</text>'
    )
    return "\n".join(parts)


def _points(points: list[tuple[float, float]]) -> str:
    return " ".join(f"{a:.1f},{b:.1f}" for a, b in points)
