"""bench/prm_thresholds.py: one threshold or one per subset, each judged out of fold."""

import json
from pathlib import Path

import numpy as np
import pytest

from bench.prm_quality import main
from bench.prm_thresholds import (
    HALVING_SEEDS,
    MARGIN,
    cross_fitted,
    decide,
    describe_rule,
    out_of_fold_thresholds,
    threshold_figures,
)
from worker.eval_sets import ProcessBenchItem, unit_hash
from worker.evaluate import FirstErrors, choose_threshold


def _solutions(
    subset: str, count: int, fine: float, error: float, noise: float = 0.0
) -> tuple[list[ProcessBenchItem], list[list[float]]]:
    """``count`` solutions of three steps, every other one wrong at step 1: sound steps
    score ``fine`` and the wrong one ``error`` (P(step is fine)), plus uniform noise."""
    rng = np.random.default_rng(len(subset) * 1000 + count)
    items, scores = [], []
    for k in range(count):
        label = 1 if k % 2 else -1
        step_scores = [fine, error if label == 1 else fine, fine]
        items.append(
            ProcessBenchItem(subset, f"{subset}-{k}", f"{subset} {k}?", ["a"] * 3, label, True)
        )
        scores.append(list(np.array(step_scores) + rng.uniform(-noise, noise, 3)))
    return items, scores


def _pool(
    *parts: tuple[list[ProcessBenchItem], list[list[float]]],
) -> tuple[list[ProcessBenchItem], FirstErrors]:
    items = [i for part in parts for i in part[0]]
    scores = [s for part in parts for s in part[1]]
    return items, FirstErrors(scores, [i.label for i in items])


def test_each_half_is_judged_by_the_thresholds_chosen_on_the_other() -> None:
    items, solutions = _pool(_solutions("a", 30, 0.9, 0.6, 0.1), _solutions("b", 30, 0.5, 0.1, 0.1))
    subsets = np.array([i.subset for i in items])
    halves = np.array([unit_hash(HALVING_SEEDS[0], i.problem) < 0.5 for i in items])

    one = out_of_fold_thresholds(solutions, subsets, halves, per_subset=False)
    each = out_of_fold_thresholds(solutions, subsets, halves, per_subset=True)

    for half in (False, True):
        judged = halves == half
        assert np.all(one[judged] == choose_threshold(solutions.subset(~judged)))
        for name in ("a", "b"):
            mine = judged & (subsets == name)
            chosen = choose_threshold(solutions.subset(~judged & (subsets == name)))
            assert np.all(each[mine] == chosen)


def test_subsets_that_need_different_thresholds_pick_one_per_subset() -> None:
    # Subset a's wrong steps score 0.6, its sound ones 0.9; subset b's 0.1 and 0.5: a
    # threshold at 0.75 suits a and misjudges every one of b's solutions, and at 0.3 the reverse.
    items, solutions = _pool(
        _solutions("a", 40, 0.9, 0.6, 0.05), _solutions("b", 40, 0.5, 0.1, 0.05)
    )

    rule = decide([threshold_figures(items, solutions)])

    assert rule["decision"] == "per_subset"
    assert rule["cross_fitted_mean_f1"]["per_subset"] > 0.95
    assert rule["difference"] >= MARGIN
    assert rule["pairs"] == len(HALVING_SEEDS)
    assert "per_subset" in describe_rule(rule)


def test_subsets_that_one_threshold_separates_keep_one() -> None:
    items, solutions = _pool(
        _solutions("a", 40, 0.9, 0.1, 0.05), _solutions("b", 40, 0.8, 0.2, 0.05)
    )

    rule = decide([threshold_figures(items, solutions), threshold_figures(items, solutions)])

    assert rule["decision"] == "one"
    assert rule["cross_fitted_mean_f1"]["one"] == 1.0
    assert rule["pairs"] == 2 * len(HALVING_SEEDS)
    low, high = rule["difference_percentiles"]
    assert low <= rule["difference"] <= high


def test_in_sample_figures_flatter_the_per_subset_rule_that_cross_fitting_does_not() -> None:
    # Pure noise: no threshold knows anything, yet four thresholds fit a sample's noise.
    items, solutions = _pool(*(_solutions(name, 24, 0.5, 0.5, 0.4) for name in "abcd"))

    figures = threshold_figures(items, solutions)
    halving = cross_fitted(items, solutions, HALVING_SEEDS[0])

    in_sample = figures["in_sample"]
    assert in_sample["per_subset"]["mean"] >= in_sample["one"]["mean"]
    assert set(in_sample["per_subset"]["thresholds"]) == {"a", "b", "c", "d"}
    assert set(halving) == {"one", "per_subset"}
    rule = decide([figures])
    assert rule["cross_fitted_mean_f1"]["per_subset"] < in_sample["per_subset"]["mean"]


def test_the_bench_on_calibration_writes_the_rule_and_reads_no_test_problem(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = tmp_path / "figures.json"

    main(["--models=constant", "--per-subset=40", "--judge=calibration", f"--json={figures}"])

    (result,) = json.loads(figures.read_text())
    assert result["threshold_rule"]["decision"] in ("one", "per_subset")
    printed = capsys.readouterr().out
    assert ", 0 test solutions" in printed
