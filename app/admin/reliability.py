"""Inter-rater reliability coefficients on ordered categories, vectorized with numpy.

Ratings are category indexes 0..K-1 in their natural order (for step ratings: -1, 0, +1 become
0, 1, 2). A coefficient that is undefined (no pairable ratings, or no expected disagreement
because every rating fell into one category) is None, never a made-up 0 or 1.
"""

from typing import Literal

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Weights = Literal["none", "linear"]


def category_counts(unit: IntArray, category: IntArray, units: int, categories: int) -> IntArray:
    """The units x categories table of how many ratings each unit got in each category."""
    flat = np.bincount(unit * categories + category, minlength=units * categories)
    return flat.reshape(units, categories)


def krippendorff_alpha_ordinal(counts: IntArray) -> float | None:
    """Krippendorff's alpha with the ordinal metric, from a units x categories count table.

    Units with fewer than two ratings are not pairable and are left out, as in Krippendorff
    (2011), "Computing Krippendorff's alpha-reliability".
    """
    counts = counts[counts.sum(axis=1) >= 2]
    if len(counts) == 0:
        return None
    raters = counts.sum(axis=1).astype(np.float64)
    # The coincidence matrix: every ordered pair of ratings within a unit, weighted 1/(m-1).
    weighted = counts / (raters - 1)[:, None]
    coincidences = weighted.T @ counts - np.diag(weighted.sum(axis=0))
    totals = coincidences.sum(axis=1)
    pairable = float(totals.sum())
    distance = _ordinal_distance(totals)
    expected = float((np.outer(totals, totals) * distance).sum())
    if expected == 0:
        return None
    observed = float((coincidences * distance).sum())
    return 1.0 - (pairable - 1) * observed / expected


def _ordinal_distance(totals: FloatArray) -> FloatArray:
    """Krippendorff's squared ordinal distance between categories c <= k: the ratings from c
    to k in rank order, minus half of those in c and k themselves."""
    cumulative = np.concatenate(([0.0], np.cumsum(totals)))
    low = np.minimum.outer(np.arange(len(totals)), np.arange(len(totals)))
    high = np.maximum.outer(np.arange(len(totals)), np.arange(len(totals)))
    between = cumulative[high + 1] - cumulative[low]
    distance: FloatArray = (between - (totals[low] + totals[high]) / 2) ** 2
    return distance


def fleiss_kappa(counts: IntArray) -> float | None:
    """Fleiss' kappa, generalized to a varying number of raters per unit.

    Each unit's agreement is the share of its ordered rating pairs that match, and units weigh
    equally; the chance agreement comes from the pooled category shares. With the same number
    of raters everywhere this is Fleiss (1971) exactly.
    """
    counts = counts[counts.sum(axis=1) >= 2]
    if len(counts) == 0:
        return None
    raters = counts.sum(axis=1).astype(np.float64)
    per_unit = ((counts**2).sum(axis=1) - raters) / (raters * (raters - 1))
    shares = counts.sum(axis=0) / raters.sum()
    chance = float((shares**2).sum())
    if chance == 1:
        return None
    return (float(per_unit.mean()) - chance) / (1 - chance)


def confusion_matrices(
    group: IntArray, first: IntArray, second: IntArray, groups: int, categories: int
) -> IntArray:
    """One categories x categories table per group of rating pairs (first rating in rows)."""
    flat = np.bincount(
        (group * categories + first) * categories + second,
        minlength=groups * categories * categories,
    )
    return flat.reshape(groups, categories, categories)


def cohen_kappa(confusions: IntArray, weights: Weights = "none") -> FloatArray:
    """Cohen's kappa of each of a stack of confusion tables (..., K, K); NaN where undefined.

    ``weights="linear"`` gives the linearly weighted kappa: a disagreement costs its distance
    in categories, |i - j| / (K - 1).
    """
    size = confusions.shape[-1]
    index = np.arange(size)
    if weights == "linear":
        disagreement = np.abs(index[:, None] - index[None, :]) / (size - 1)
    else:
        disagreement = (index[:, None] != index[None, :]).astype(np.float64)
    totals = confusions.sum(axis=(-2, -1)).astype(np.float64)
    rows = confusions.sum(axis=-1)
    columns = confusions.sum(axis=-2)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = rows[..., :, None] * columns[..., None, :] / totals[..., None, None]
        observed_cost = (confusions * disagreement).sum(axis=(-2, -1))
        expected_cost = (expected * disagreement).sum(axis=(-2, -1))
        kappa: FloatArray = np.where(expected_cost > 0, 1 - observed_cost / expected_cost, np.nan)
    return kappa


def observed_agreement(confusions: IntArray) -> FloatArray:
    """The share of pairs on the diagonal of each confusion table; NaN for an empty one."""
    totals = confusions.sum(axis=(-2, -1))
    diagonal = np.trace(confusions, axis1=-2, axis2=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share: FloatArray = np.where(totals > 0, diagonal / totals, np.nan)
    return share


def pairs_within_groups(sizes: IntArray) -> tuple[IntArray, IntArray]:
    """Positions (i, j), i < j, of every pair of items within consecutive groups of ``sizes``.

    Items are numbered in group order, so the first group holds 0..sizes[0]-1. The loop runs
    once per distinct group size (a handful), not once per group.
    """
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    firsts: list[IntArray] = []
    seconds: list[IntArray] = []
    for size in np.unique(sizes[sizes >= 2]):
        group_starts = starts[sizes == size]
        i, j = np.triu_indices(int(size), k=1)
        firsts.append((group_starts[:, None] + i[None, :]).ravel())
        seconds.append((group_starts[:, None] + j[None, :]).ravel())
    if not firsts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    return np.concatenate(firsts), np.concatenate(seconds)


def optional(value: float) -> float | None:
    """None for NaN: JSON and the page show an undefined figure as missing, not as NaN."""
    return None if np.isnan(value) else float(value)
