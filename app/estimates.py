"""Figures with 95% bootstrap intervals, and the step AUROC: the worker's evaluation
(worker/evaluate.py) and the PRM page's figures on the control labels share them.

Pure numpy: callers compute the arrays, a statistic reads a resample as the indices of the
units drawn (problems, solutions, labels).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

RESAMPLES = 1000
"""Bootstrap resamples per interval."""
LEVEL = 0.95

MIN_UNITS = 5
MIN_STEPS_PER_CLASS = 5
"""Below these, a step AUROC says "not enough data" instead of a figure: with fewer,
most bootstrap draws lack a class. Above them a small set gives a figure with a wide
interval, which says what it is worth (a demo's first 60 labels hold out about 7 negative
steps)."""

Statistic = Callable[[np.ndarray], float | None]
"""A figure computed on a resample, given as the indices of the units drawn."""


@dataclass(frozen=True)
class Estimate:
    """A figure and its 95% bootstrap interval, over ``n`` units (problems or solutions)."""

    value: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)

    def overlaps(self, other: Estimate) -> bool:
        return self.low <= other.high and other.low <= self.high


def resample(strata: Sequence[np.ndarray], resamples: int, seed: int) -> list[np.ndarray]:
    """Index draws with replacement, each stratum resampled to its own size."""
    rng = np.random.default_rng(seed)
    # One draw per stratum for every resample at once: a draw per resample and stratum
    # made the gate's simulation (bench/gate_rates.py) mostly random-number calls.
    draws = [s[rng.integers(0, len(s), (resamples, len(s)))] for s in strata]
    return list(np.concatenate(draws, axis=1))


def split_units(indices: np.ndarray, strata: Sequence[int] | None) -> list[np.ndarray]:
    """The units of each stratum (one label per unit); all of them in one without."""
    if strata is None:
        return [indices]
    labels = np.asarray(strata)
    return [indices[labels == label] for label in np.unique(labels)]


def percentile_interval(values: list[float]) -> tuple[float, float]:
    """The central ``LEVEL`` share of bootstrap draws: their 2.5th and 97.5th percentiles."""
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(np.array(values), [tail, 100 - tail])
    return float(low), float(high)


def bootstrap(
    statistic: Statistic,
    units: int,
    *,
    strata: Sequence[int] | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Estimate | None:
    """The statistic on all ``units`` and its percentile interval; None where it is undefined.

    With ``strata`` (one label per unit), each stratum is resampled within itself, so a
    figure averaged over subsets keeps each subset's weight.
    """
    everything = np.arange(units)
    value = statistic(everything) if units else None
    if value is None:
        return None
    draws = [statistic(i) for i in resample(split_units(everything, strata), resamples, seed)]
    defined = [d for d in draws if d is not None]
    low, high = percentile_interval(defined) if defined else (value, value)
    return Estimate(value, low, high, units)


def auroc(scores: np.ndarray, positives: np.ndarray) -> float | None:
    """Area under the ROC curve (Mann-Whitney U, ties counted half); None with one class."""
    positives = positives.astype(bool)
    n_pos = int(positives.sum())
    n_neg = len(positives) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    # The average 1-based rank of each distinct score: tied scores share it.
    first_rank = np.cumsum(counts) - counts + 1
    ranks = (first_rank + (counts - 1) / 2)[inverse]
    u = ranks[positives].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


@dataclass(frozen=True)
class StepSet:
    """Labeled steps grouped by unit (problem, solution): per unit, P(-1) of each step and
    its rating."""

    negative_probability: list[np.ndarray]
    ratings: list[np.ndarray]
    units: str = "held-out problems"
    """What the units are, for "not enough data" (plural)."""

    def auroc_statistic(self) -> Statistic:
        """``auroc`` of P(-1) for the -1 steps against the rest, over the steps of the units
        drawn, each unit counted as often as it is drawn.

        The steps are ranked once, here, and a draw only weighs them: each -1 step's score
        is above the other steps' ranked below it and ties half of those ranked with it. A
        resample costs a few passes over the steps instead of a sort, 7 times faster
        (bench/bootstrap.py), and gives the same figure to the last bit.
        """
        units = len(self.ratings)
        unit_of_step = np.repeat(np.arange(units), [len(r) for r in self.ratings])
        scores = np.concatenate(self.negative_probability) if units else np.zeros(0)
        is_error = (np.concatenate(self.ratings) == -1) if units else np.zeros(0, dtype=bool)
        # Tied scores share a group; groups are numbered in ascending order of score.
        _, group = np.unique(scores, return_inverse=True)
        groups = int(group.max()) + 1 if len(group) else 0

        def statistic(drawn: np.ndarray) -> float | None:
            weight = np.bincount(drawn, minlength=units)[unit_of_step].astype(np.float64)
            error_weight, other_weight = weight * is_error, weight * ~is_error
            errors, others = error_weight.sum(), other_weight.sum()
            if errors == 0 or others == 0:
                return None
            others_in_group = np.bincount(group, weights=other_weight, minlength=groups)
            others_below = np.cumsum(others_in_group) - others_in_group
            beaten = others_below[group] + others_in_group[group] / 2
            return float(error_weight @ beaten / (errors * others))

        return statistic

    def shortage(self) -> str | None:
        """Why there is not enough data for a figure; None when there is."""
        ratings = np.concatenate(self.ratings) if self.ratings else np.zeros(0)
        negatives = int((ratings == -1).sum())
        others = len(ratings) - negatives
        if len(self.ratings) < MIN_UNITS:
            return f"not enough data: {len(self.ratings)} {self.units} (needs {MIN_UNITS})"
        if min(negatives, others) < MIN_STEPS_PER_CLASS:
            return (
                f"not enough data: {negatives} negative and {others} other steps "
                f"(needs {MIN_STEPS_PER_CLASS} of each)"
            )
        return None


def step_auroc(steps: StepSet, seed: int = 0) -> dict[str, Any]:
    """Step AUROC (negative against the rest) with its interval, or why there is none."""
    shortage = steps.shortage()
    if shortage is not None:
        return {"status": shortage}
    estimate = bootstrap(steps.auroc_statistic(), len(steps.ratings), seed=seed)
    if estimate is None:
        return {"status": "not enough data: one class only"}
    return {"status": "ok", **estimate.as_dict()}
