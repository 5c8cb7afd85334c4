"""The figures and the gate on fixed inputs, worked out by hand or by brute force."""

import itertools
from pathlib import Path

import numpy as np
import pytest

from worker import evaluate
from worker.eval_sets import processbench_missing
from worker.evaluate import (
    Comparison,
    Estimate,
    FirstErrors,
    GateDecision,
    Sample,
    StepSet,
    auroc,
    best_of_n,
    bootstrap,
    choose_threshold,
    first_error,
    gate,
    paired_difference,
    predicted_first_error,
    processbench_figures,
    selection_yield,
    step_auroc,
    t_quantile,
)


def test_first_error_positions() -> None:
    assert first_error([1, 0, -1, 1]) == 2
    assert first_error([1, 1]) == -1
    assert first_error([1, None, -1]) == 2
    assert predicted_first_error([0.9, 0.4, 0.1], 0.5) == 1
    assert predicted_first_error([0.9, 0.6], 0.5) == -1


def _brute_force_f1(scores: list[list[float]], labels: list[int], threshold: float) -> float:
    hits = [
        predicted_first_error(s, threshold) == label
        for s, label in zip(scores, labels, strict=True)
    ]
    erroneous = [h for h, label in zip(hits, labels, strict=True) if label >= 0]
    correct = [h for h, label in zip(hits, labels, strict=True) if label < 0]
    a, b = sum(erroneous) / len(erroneous), sum(correct) / len(correct)
    return 2 * a * b / (a + b) if a + b else 0.0


def test_processbench_f1_is_the_harmonic_mean_of_both_accuracies() -> None:
    # Labels: first error at 1, at 2, none, none. Threshold 0.5.
    scores = [[0.9, 0.2], [0.3, 0.9, 0.9], [0.9, 0.8], [0.9, 0.4, 0.9]]
    labels = [1, 2, -1, -1]
    solutions = FirstErrors(scores, labels)

    # Erroneous: first right, second wrong (predicted 0) -> 0.5; correct: 1 of 2 -> 0.5.
    assert solutions.accuracies(0.5) == (0.5, 0.5)
    figures = processbench_figures({"x": solutions}, 0.5)
    assert figures["subsets"]["x"]["f1"]["value"] == pytest.approx(0.5)
    assert figures["f1"]["value"] == pytest.approx(0.5)
    assert figures["subsets"]["x"]["erroneous"] == 2 and figures["subsets"]["x"]["correct"] == 2


@pytest.mark.parametrize("seed", range(4))
def test_vectorized_hits_agree_with_the_first_error_rule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = [rng.random(rng.integers(1, 6)).round(1).tolist() for _ in range(40)]
    labels = [int(rng.integers(-1, len(s))) for s in scores]
    solutions = FirstErrors(scores, labels)

    for threshold in (0.05, 0.3, 0.5, 0.55, 0.9):
        hits = solutions.hits(threshold)[0]
        expected = [
            predicted_first_error(s, threshold) == t for s, t in zip(scores, labels, strict=True)
        ]
        assert hits.tolist() == expected


@pytest.mark.parametrize("seed", range(4))
def test_the_chosen_threshold_is_the_best_on_its_own_set(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = [rng.random(rng.integers(1, 6)).tolist() for _ in range(60)]
    labels = [int(rng.integers(-1, len(s))) for s in scores]

    chosen = choose_threshold(FirstErrors(scores, labels))

    best = max(_brute_force_f1(scores, labels, t) for t in np.linspace(0, 1.01, 400))
    assert _brute_force_f1(scores, labels, chosen) == pytest.approx(best)


def test_bootstrap_interval_brackets_the_value_and_narrows_with_more_data() -> None:
    rng = np.random.default_rng(0)
    widths = []
    for size in (30, 600):
        values = rng.random(size)
        estimate = bootstrap(lambda units, v=values: float(v[units].mean()), size, seed=1)
        assert estimate is not None
        assert estimate.low <= estimate.value <= estimate.high
        assert estimate.n == size
        widths.append(estimate.high - estimate.low)
    assert widths[1] < widths[0] / 2


def test_bootstrap_is_reproducible_for_a_seed() -> None:
    values = np.arange(20.0)

    def mean(units: np.ndarray) -> float:
        return float(values[units].mean())

    assert bootstrap(mean, 20, seed=3) == bootstrap(mean, 20, seed=3)
    assert bootstrap(mean, 20, seed=3) != bootstrap(mean, 20, seed=4)


def test_step_auroc_says_when_there_is_not_enough_data() -> None:
    few = StepSet([np.array([0.9, 0.1])] * 3, [np.array([-1, 1])] * 3)
    assert step_auroc(few)["status"].startswith("not enough data: 3 held-out problems")

    one_sided = StepSet([np.array([0.1] * 4)] * 6, [np.array([1] * 4)] * 6)
    assert "0 negative" in step_auroc(one_sided)["status"]


def test_step_auroc_resamples_problems() -> None:
    rng = np.random.default_rng(2)
    ratings = [rng.choice([-1, 0, 1], size=8) for _ in range(30)]
    # P(-1) is higher on negative steps, with noise.
    negative = [np.where(r == -1, 0.6, 0.4) + rng.normal(0, 0.2, size=8) for r in ratings]

    figure = step_auroc(StepSet(negative, ratings))

    assert figure["status"] == "ok" and figure["n"] == 30
    assert 0.5 < figure["low"] < figure["value"] < figure["high"] <= 1.0


def test_a_resample_counts_each_drawn_problem_as_often_as_it_is_drawn() -> None:
    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 6, size=12)
    ratings = [rng.choice([-1, 0, 1], size=n) for n in sizes]
    # Scores on a coarse grid: many ties, within a problem and across problems.
    negative = [rng.integers(0, 4, size=n) / 4 for n in sizes]
    statistic = StepSet(negative, ratings).auroc_statistic()

    def by_copying(problems: np.ndarray) -> float | None:
        """The steps of the drawn problems laid out again, each copy its own item."""
        scores = np.concatenate([negative[p] for p in problems])
        errors = np.concatenate([ratings[p] for p in problems]) == -1
        return auroc(scores, errors)

    draws = [rng.integers(0, 12, size=12) for _ in range(200)] + [np.array([0, 0, 0])]
    for drawn in draws:
        assert statistic(drawn) == by_copying(drawn)  # to the last bit
    one_class = next(p for p in range(12) if len(set(ratings[p] == -1)) == 1)
    assert statistic(np.array([one_class, one_class])) is None


def test_best_of_n_against_majority_and_random() -> None:
    problems = [
        # problem 1: the PRM picks the right one, the majority (group 1) is wrong
        [Sample(0.9, 0, True), Sample(0.2, 1, False), Sample(0.3, 1, False)],
        # problem 2: the PRM picks a wrong one, the majority is right
        [Sample(0.9, 0, False), Sample(0.5, 1, True), Sample(0.4, 1, True)],
        # problem 3: a single sample does not count
        [Sample(0.9, 0, True)],
    ]
    figures = best_of_n(problems)

    assert figures["problems"] == 2
    assert figures["prm"]["value"] == 0.5
    assert figures["majority"]["value"] == 0.5
    assert figures["random"]["value"] == pytest.approx((1 / 3 + 2 / 3) / 2)


def test_majority_vote_counts_grader_groups_not_strings() -> None:
    # "1/2" and "0.5" share group 0: two votes against one for group 1.
    problem = [Sample(0.1, 0, True), Sample(0.1, 0, True), Sample(0.9, 1, False)]
    assert best_of_n([problem])["majority"]["value"] == 1.0
    assert best_of_n([problem])["prm"]["value"] == 0.0


def test_selection_yield() -> None:
    assert selection_yield([False, False, True, None]) == pytest.approx(2 / 3)
    assert selection_yield([None]) is None


MARGIN = 0.02


def _means(values: np.ndarray, metric: str = "step_auroc", current: float = 0.7) -> Comparison:
    """A comparison whose 'current' model scores ``current`` on every unit."""
    return Comparison(
        metric, lambda units: float(values[units].mean()), lambda units: current, len(values)
    )


def _judge(*comparisons: Comparison, primary: str = "step_auroc") -> GateDecision:
    return gate(comparisons, primary=primary, margin=MARGIN, has_current=True)


def test_the_gate_keeps_the_current_model_when_the_new_one_is_worse_beyond_the_margin() -> None:
    worse = _means(np.random.default_rng(0).normal(0.6, 0.02, size=50))

    decision = _judge(worse)

    assert not decision.promote
    assert decision.metric == "step_auroc"
    assert decision.difference is not None and decision.difference.high < -MARGIN
    assert decision.reason.startswith("kept the current model: step_auroc 0.6")
    assert "against 0.700 [0.700, 0.700]" in decision.reason


def test_a_small_drop_within_the_margin_is_not_enough_on_the_primary_metric() -> None:
    """Not worse beyond the margin, but below the current model: small drops would add up
    run after run, so the primary metric must be better or equal."""
    slightly_lower = _means(np.full(300, 0.695) + np.random.default_rng(1).normal(0, 0.01, 300))

    decision = _judge(slightly_lower)

    assert not decision.promote and decision.metric == "step_auroc"
    assert decision.difference is not None and decision.difference.low > -MARGIN
    assert decision.difference.value < 0
    assert "below the current model's" in decision.reason


def test_a_handful_of_problems_cannot_show_a_model_is_not_worse() -> None:
    """The demo's 8 held-out problems: a model as good as the current one on average is
    kept out, since its interval reaches below the margin (it used to pass)."""
    noisy = _means(np.array([0.9, 0.5, 0.8, 0.6, 0.75, 0.65, 0.7, 0.7]))

    decision = _judge(noisy)

    assert not decision.promote
    assert decision.difference is not None and decision.difference.low < -MARGIN
    assert "worse beyond the margin 0.020 not ruled out" in decision.reason


def test_a_collapse_on_another_metric_keeps_the_new_model_out() -> None:
    better = _means(np.full(200, 0.8))
    collapsed = _means(np.full(200, 0.3), metric="processbench_f1", current=0.45)

    decision = _judge(better, collapsed)

    assert not decision.promote and decision.metric == "processbench_f1"
    assert decision.primary == "step_auroc"
    assert [j.metric for j in decision.judged] == ["step_auroc", "processbench_f1"]
    assert [j.passed for j in decision.judged] == [True, False]
    assert decision.reason.startswith("kept the current model: processbench_f1 0.300")


def test_the_gate_promotes_a_model_not_worse_anywhere_and_better_on_the_primary() -> None:
    better = _means(np.random.default_rng(2).normal(0.75, 0.05, size=300))
    same = _means(np.full(300, 0.45), metric="best_of_n", current=0.45)

    decision = _judge(better, same)

    assert decision.promote and decision.metric == "step_auroc"
    assert decision.reason.startswith("promoted: step_auroc 0.7")
    assert "no judged metric worse beyond the margin 0.020" in decision.reason
    assert decision.as_dict()["judged"][1]["verdict"] == "not worse beyond the margin 0.020"
    assert decision.as_dict()["margin"] == MARGIN


def test_the_gate_needs_a_current_model_and_a_comparable_metric() -> None:
    first = gate([], primary="step_auroc", margin=MARGIN, has_current=False)
    assert first.promote and first.reason == "first model"
    undecided = _judge()
    assert not undecided.promote and "no metric could compare" in undecided.reason


def test_without_the_primary_metric_the_first_judged_one_leads() -> None:
    undefined = Comparison("step_auroc", lambda units: None, lambda units: 0.7, 10)
    f1 = Comparison("processbench_f1", lambda units: 0.8, lambda units: 0.5, 10)

    decision = gate(
        [undefined, f1],
        primary="step_auroc",
        margin=MARGIN,
        has_current=True,
        not_judged={"best_of_n": "no samples"},
    )

    assert decision.promote and decision.metric == decision.primary == "processbench_f1"
    assert decision.not_judged == {
        "step_auroc": "undefined on these units",
        "best_of_n": "no samples",
    }


def test_paired_difference_draws_each_resample_once_for_both() -> None:
    """Two statistics that differ by a constant on every draw: the interval is that constant."""
    values = np.random.default_rng(3).random(40)

    difference = paired_difference(
        lambda u: float(values[u].mean()) + 0.1, lambda u: float(values[u].mean()), 40
    )

    assert difference == Estimate(pytest.approx(0.1), pytest.approx(0.1), pytest.approx(0.1), 40)


def test_paired_difference_is_a_t_interval_for_a_mean() -> None:
    """For a mean, the bootstrap's standard error, corrected for n, with Student's t, is the
    textbook paired t interval."""
    differences = np.random.default_rng(4).normal(0.05, 0.2, size=8)
    mean = float(differences.mean())
    half = 2.365 * differences.std(ddof=1) / np.sqrt(8)  # t(0.975, 7 df)

    estimate = paired_difference(lambda u: float(differences[u].mean()), lambda u: 0.0, 8)

    assert estimate is not None and estimate.value == pytest.approx(mean)
    assert estimate.low == pytest.approx(mean - half, rel=0.1)
    assert estimate.high == pytest.approx(mean + half, rel=0.1)


def test_the_gate_resamples_processbench_within_its_subsets() -> None:
    """As the figure shown does: each resample keeps every subset's size."""
    strata = np.array([0] * 3 + [1] * 7)
    values = np.linspace(0.0, 1.0, 10)
    drawn: list[list[int]] = []

    def mean(units: np.ndarray) -> float:
        drawn.append(np.bincount(strata[units], minlength=2).tolist())
        return float(values[units].mean())

    comparison = Comparison("processbench_f1", mean, lambda u: 0.1, 10, strata=strata.tolist())
    gate([comparison], primary="processbench_f1", margin=MARGIN, has_current=True)

    assert len(drawn) > 1000 and all(counts == [3, 7] for counts in drawn)


@pytest.mark.parametrize(
    ("df", "exact"), [(3, 3.182), (4, 2.776), (7, 2.365), (30, 2.042), (1000, 1.962)]
)
def test_t_quantile(df: int, exact: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(exact, abs=0.004)


def test_estimates_overlap() -> None:
    a, b, c = (
        Estimate(0.5, 0.4, 0.6, 10),
        Estimate(0.65, 0.58, 0.7, 10),
        Estimate(0.8, 0.7, 0.9, 10),
    )
    assert a.overlaps(b) and b.overlaps(a)
    assert not a.overlaps(c)
    assert list(itertools.starmap(Estimate.overlaps, [(b, c)])) == [True]


def test_the_worker_names_the_setting_when_processbench_is_missing(tmp_path: Path) -> None:
    assert "STEPLABEL_EVAL_DIR is not set" in (processbench_missing(None) or "")
    assert f"no processbench_*.jsonl in {tmp_path}" in (processbench_missing(tmp_path) or "")
    (tmp_path / "processbench_math.jsonl").write_text("")
    assert processbench_missing(tmp_path) is None


def test_first_errors_judged_at_one_threshold_each_and_picked_by_mask() -> None:
    solutions = evaluate.FirstErrors([[0.9, 0.2], [0.9, 0.8], [0.4, 0.9]], [1, -1, 0])

    assert solutions.hits_at(np.array([0.5, 0.5, 0.5])).tolist() == [True, True, True]
    assert solutions.hits_at(np.array([0.1, 0.85, 0.3])).tolist() == [False, False, False]
    picked = solutions.subset(np.array([True, False, True]))
    assert len(picked) == 2 and len(solutions) == 3
    assert picked.erroneous.tolist() == [True, True]
    assert picked.hits(0.5)[0].tolist() == solutions.hits(0.5)[0][[0, 2]].tolist()
    assert evaluate.f1_from_hits(np.array([True, False]), np.array([True, False])) == 0.0
