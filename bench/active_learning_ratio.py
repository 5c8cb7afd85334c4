"""bench/active_learning.py's figures over the seeds: each figure's mean with its bootstrap
interval (seeds and judged units drawn together), and the data-efficiency ratio, uniform's
labels per label, read off uniform's mean curve in log(labels).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from app.estimates import RESAMPLES, Statistic, percentile_interval, split_units
from bench.active_learning_learner import Snapshot
from bench.active_learning_rounds import REFERENCE, Run, Schedule

SEED_ROW = "seed set (all)"
WHOLE_POOL_ROW = f"{REFERENCE}, the whole pool"
"""The summary's rows that are not a strategy's: the seed set, and uniform on to the pool."""
FIGURES = {"f1": "ProcessBench F1", "auroc": "step AUROC"}
POOL_FIGURES = {"pool_f1": "held-out pool F1", "pool_auroc": "held-out pool step AUROC"}
"""bon32's second judge: its held-out problems, by the simulated labeler's labels."""
Draw = tuple[np.ndarray, np.ndarray]
"""One bootstrap draw: the seeds (indices, with replacement) and the judged units."""


def joint_draws(snapshots: Sequence[Snapshot], figure: str) -> list[Draw]:
    """Draws that resample the seeds and the judged units together, so that an interval
    holds both the seed-to-seed spread and the judged set's sampling error. The same draws
    (a fixed generator) for every strategy and budget: every model is judged alike."""
    seeds = len(snapshots)
    units, strata = snapshots[0].units(figure)
    groups = split_units(np.arange(units), strata)
    rng = np.random.default_rng(0)
    return [
        (
            rng.integers(0, seeds, seeds),
            np.concatenate([g[rng.integers(0, len(g), len(g))] for g in groups]),
        )
        for _ in range(RESAMPLES)
    ]


def mean_over(
    statistics: Sequence[Statistic], seeds: np.ndarray, units: np.ndarray
) -> float | None:
    values = [statistics[k](units) for k in seeds]
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if len(present) == len(values) else None


def _interval(draws: list[float | None], point: float) -> tuple[float, float]:
    defined = [d for d in draws if d is not None]
    return percentile_interval(defined) if defined else (point, point)


def _statistics(snapshots: Sequence[Snapshot], figure: str) -> list[Statistic] | None:
    statistics = [s.statistic(figure) for s in snapshots]
    present = [s for s in statistics if s is not None]
    return present if len(present) == len(statistics) else None


def estimate(snapshots: Sequence[Snapshot], figure: str) -> dict[str, Any]:
    """The seeds' mean figure, its 95% interval over seeds and judged units drawn together,
    and the spread over seeds."""
    statistics = _statistics(snapshots, figure)
    if statistics is None:
        return {"status": "not enough data"}
    seeds = np.arange(len(statistics))
    everything = np.arange(snapshots[0].units(figure)[0])
    value = mean_over(statistics, seeds, everything)
    if value is None:
        return {"status": "not enough data"}
    draws = [mean_over(statistics, s, u) for s, u in joint_draws(snapshots, figure)]
    low, high = _interval(draws, value)
    per_seed = [s(everything) for s in statistics]
    present = [v for v in per_seed if v is not None]
    return {
        "status": "ok",
        "value": value,
        "low": low,
        "high": high,
        "n": len(everything),
        "seed_sd": float(np.std(present, ddof=1)) if len(present) > 1 else 0.0,
        "per_seed": per_seed,
    }


def labels_to_reach(sizes: Sequence[int], curve: Sequence[float], value: float) -> float:
    """Where ``curve`` (a figure at ``sizes`` labels) first reaches ``value``, reading it
    linearly in log(labels): the first size if it starts there, the last if it never does."""
    if value <= curve[0]:
        return float(sizes[0])
    for (n0, y0), (n1, y1) in pairwise(zip(sizes, curve, strict=True)):
        if y1 >= value:
            share = (value - y0) / (y1 - y0)
            return math.exp(math.log(n0) + share * (math.log(n1) - math.log(n0)))
    return float(sizes[-1])


def reach_note(curve: Sequence[float], value: float) -> str:
    if value > max(curve):
        return "beyond"
    return "below" if value < curve[0] else ""


def efficiency(
    reference: dict[int, list[Snapshot]], chosen: list[Snapshot], budget: int, figure: str
) -> dict[str, Any]:
    """Labels the reference needs to reach ``chosen``'s figure, per label at ``budget``:
    the seeds' mean curve against the seeds' mean figure, the same seeds for both (a seed
    gives both their seed set) in every draw."""
    sizes = sorted(reference)
    curves = [_statistics(reference[n], figure) for n in sizes]
    values = _statistics(chosen, figure)
    if values is None or any(c is None for c in curves):
        return {"status": "not enough data"}
    known = [c for c in curves if c is not None]

    def ratio(seeds: np.ndarray, units: np.ndarray) -> float | None:
        curve = [mean_over(c, seeds, units) for c in known]
        value = mean_over(values, seeds, units)
        if value is None or any(y is None for y in curve):
            return None
        return labels_to_reach(sizes, [y for y in curve if y is not None], value) / budget

    everything = np.arange(chosen[0].units(figure)[0])
    all_seeds = np.arange(len(chosen))
    point = ratio(all_seeds, everything)
    if point is None:
        return {"status": "not enough data"}
    draws = [ratio(seeds, units) for seeds, units in joint_draws(chosen, figure)]
    low, high = _interval(draws, point)
    curve = [mean_over(c, all_seeds, everything) or 0.0 for c in known]
    per_seed = [ratio(np.array([k]), everything) or 0.0 for k in range(len(chosen))]
    return {
        "status": "ok",
        "value": point,
        "low": low,
        "high": high,
        "reach": reach_note(curve, mean_over(values, all_seeds, everything) or 0.0),
        "floor": sizes[0] / budget,
        "cap": sizes[-1] / budget,
        "per_seed": per_seed,
    }


def figures_of(runs: dict[str, list[Run]]) -> list[str]:
    """The figures the runs were judged by: ProcessBench's, and the held-out pool's where
    the corpus has held-out problems (bon32)."""
    shot = next(iter(runs[REFERENCE][0].snapshots.values()))
    return [*FIGURES, *(POOL_FIGURES if shot.pool_f1 is not None else ())]


def summarize(
    runs: dict[str, list[Run]], schedule: Schedule, whole: Snapshot | None
) -> list[dict[str, Any]]:
    """One row per strategy and budget (and one for the shared seed set). Uniform's curve,
    the reference, runs on to the whole pool where it is larger than the largest budget."""
    figures = figures_of(runs)
    reference = {n: [r.snapshots[n] for r in runs[REFERENCE]] for n in schedule.sizes}
    if whole is not None:
        reference[whole.labels] = [whole] * len(runs[REFERENCE])
    rows = [_row(SEED_ROW, reference[schedule.seed_size], {}, figures)]
    for strategy, strategy_runs in runs.items():
        for budget in schedule.budgets:
            shots = [r.snapshots[budget] for r in strategy_runs]
            ratios = {
                figure: (
                    {"status": "ok", "value": 1.0, "low": 1.0, "high": 1.0, "reach": ""}
                    if strategy == REFERENCE
                    else efficiency(reference, shots, budget, figure)
                )
                for figure in figures
            }
            rows.append(_row(strategy, shots, ratios, figures))
    if whole is not None:
        rows.append(_row(WHOLE_POOL_ROW, [whole], {}, figures))
    return rows


def _row(
    name: str, shots: list[Snapshot], ratios: dict[str, Any], figures: Sequence[str]
) -> dict[str, Any]:
    return {
        "strategy": name,
        "labels": shots[0].labels,
        **{figure: estimate(shots, figure) for figure in figures},
        "ratio": ratios,
        "negatives_per_label": float(np.mean([s.negatives / s.labels for s in shots])),
    }
