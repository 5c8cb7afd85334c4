"""One first-error threshold for all of ProcessBench's subsets, or one per subset: which one
judges unseen solutions better, measured on calibration problems alone (issue 38's rule,
BENCHMARKS.md "one first-error threshold or one per subset").

A threshold chosen on the solutions it is judged on flatters the rule with more thresholds
(four can fit four subsets' noise where one cannot), so both rules are cross-fitted: the
calibration problems are halved by a hash of their text, thresholds are chosen on one half
and judge the other, both ways, and the halving is repeated with other hash seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from worker.eval_sets import ProcessBenchItem, unit_hash
from worker.evaluate import FirstErrors, choose_threshold, f1_from_hits

HALVINGS = 20
HALVING_SEEDS = range(100, 100 + HALVINGS)
"""Hash seeds of the halvings: none of them is a seed the split itself uses (0 and 1)."""
MARGIN = 0.02
"""How much higher the per-subset rule's cross-fitted mean F1 must be to replace one threshold."""
RULES = ("one", "per_subset")


def out_of_fold_thresholds(
    solutions: FirstErrors, subsets: np.ndarray, halves: np.ndarray, per_subset: bool
) -> np.ndarray:
    """Each solution's threshold, chosen on the other half's solutions (of its own subset
    alone with ``per_subset``)."""
    thresholds = np.empty(len(solutions))
    for half in (False, True):
        judged = halves == half
        if not per_subset:
            thresholds[judged] = choose_threshold(solutions.subset(~judged))
            continue
        for name in np.unique(subsets):
            mine = subsets == name
            thresholds[judged & mine] = choose_threshold(solutions.subset(~judged & mine))
    return thresholds


def mean_f1(solutions: FirstErrors, subsets: np.ndarray, thresholds: np.ndarray) -> dict[str, Any]:
    """F1 of each subset with each solution judged at its own threshold, and their mean."""
    hits = solutions.hits_at(thresholds)
    per_subset = {
        str(name): f1_from_hits(hits[subsets == name], solutions.erroneous[subsets == name])
        for name in np.unique(subsets)
    }
    defined = [value for value in per_subset.values() if value is not None]
    mean = float(np.mean(defined)) if len(defined) == len(per_subset) else None
    return {"mean": mean, "subsets": per_subset}


def cross_fitted(
    items: Sequence[ProcessBenchItem], solutions: FirstErrors, halving_seed: int
) -> dict[str, dict[str, Any]]:
    """Both rules' out-of-fold F1 on one halving of ``items``' problems (``solutions``: their
    first errors and scores, in the same order)."""
    subsets = np.array([item.subset for item in items])
    halves = np.array([unit_hash(halving_seed, item.problem) < 0.5 for item in items])
    return {
        rule: mean_f1(
            solutions,
            subsets,
            out_of_fold_thresholds(solutions, subsets, halves, rule == "per_subset"),
        )
        for rule in RULES
    }


def in_sample(items: Sequence[ProcessBenchItem], solutions: FirstErrors) -> dict[str, Any]:
    """Both rules chosen on every calibration solution and judged on the same ones: the
    figure that flatters the per-subset rule, reported beside the cross-fitted one."""
    subsets = np.array([item.subset for item in items])
    one = np.full(len(items), choose_threshold(solutions))
    each = np.empty(len(items))
    chosen: dict[str, float] = {}
    for name in np.unique(subsets):
        chosen[str(name)] = choose_threshold(solutions.subset(subsets == name))
        each[subsets == name] = chosen[str(name)]
    return {
        "one": mean_f1(solutions, subsets, one) | {"threshold": float(one[0])},
        "per_subset": mean_f1(solutions, subsets, each) | {"thresholds": chosen},
    }


def threshold_figures(items: Sequence[ProcessBenchItem], solutions: FirstErrors) -> dict[str, Any]:
    """One trained model's figures for the rule: every halving's cross-fitted mean F1 under
    both rules, and the in-sample figures."""
    halvings = [cross_fitted(items, solutions, seed) for seed in HALVING_SEEDS]
    return {"halvings": halvings, "in_sample": in_sample(items, solutions)}


def decide(per_seed: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The rule over every seed's figures: per subset wins only if its cross-fitted mean F1,
    averaged over halvings and seeds, is at least ``MARGIN`` above one threshold's."""
    pairs = [h for figures in per_seed for h in figures["halvings"]]
    means = {rule: [h[rule]["mean"] for h in pairs] for rule in RULES}
    if any(value is None for values in means.values() for value in values):
        return {"decision": "one", "why": "a subset's F1 is undefined on some half"}
    differences = np.array(means["per_subset"]) - np.array(means["one"])
    cross = {rule: float(np.mean(values)) for rule, values in means.items()}
    subset_names = list(pairs[0]["one"]["subsets"])
    by_subset = {
        rule: {
            name: _mean_defined([h[rule]["subsets"][name] for h in pairs]) for name in subset_names
        }
        for rule in RULES
    }
    gain = cross["per_subset"] - cross["one"]
    return {
        "cross_fitted_mean_f1": cross,
        "cross_fitted_subsets": by_subset,
        "difference": gain,
        "difference_percentiles": [float(np.percentile(differences, q)) for q in (2.5, 97.5)],
        "pairs": len(pairs),
        "margin": MARGIN,
        "decision": "per_subset" if gain >= MARGIN else "one",
        "in_sample": [figures["in_sample"] for figures in per_seed],
    }


def _mean_defined(values: Sequence[float | None]) -> float | None:
    defined = [v for v in values if v is not None]
    return float(np.mean(defined)) if defined else None


def describe_rule(rule: dict[str, Any]) -> str:
    """The rule's outcome in a line, for the bench's table."""
    if "cross_fitted_mean_f1" not in rule:
        return f"threshold rule: {rule['decision']} ({rule['why']})"
    cross = rule["cross_fitted_mean_f1"]
    low, high = rule["difference_percentiles"]
    return (
        f"threshold rule (cross-fitted calibration mean F1, {rule['pairs']} seed-halvings): "
        f"one {cross['one']:.3f}, per subset {cross['per_subset']:.3f}, difference "
        f"{rule['difference']:+.3f} [{low:+.3f}, {high:+.3f}], margin {rule['margin']}: "
        f"{rule['decision']}"
    )
