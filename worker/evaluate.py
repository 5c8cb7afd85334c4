"""How good a PRM is, with 95% bootstrap intervals, and whether a new one should replace the old.

- Step AUROC: how well P(-1) ranks the negative steps above the others, on labeled
  problems that training never saw. The bootstrap resamples problems (a problem's steps
  are not independent of each other).
- ProcessBench F1 (Zheng et al. 2024): the PRM's first error is the first step it scores
  below a threshold (none: the solution is right); accuracy on solutions with an error
  (the predicted first error is the labeled one) and on solutions without one; F1 is their
  harmonic mean. The threshold is chosen on other solutions (``choose_threshold``), never
  on those it is judged on.
- Best-of-N: per problem, whether the solution the PRM scores highest is right, against a
  majority vote over grader-normalised final answers and the expected accuracy of a
  random pick. Only independent samples count: a set the PRM selected is not a sample.
- The gate: a paired bootstrap of the difference between a new and the current PRM on the
  same examples.

Pure numpy: the worker and the benchmarks call these on arrays they computed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

RESAMPLES = 1000
"""Bootstrap resamples per interval."""
LEVEL = 0.95
MIN_PROBLEMS = 5
MIN_STEPS_PER_CLASS = 5
"""Below these, held-out step AUROC says "not enough data" instead of a figure: with fewer,
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


def _resamples(strata: Sequence[np.ndarray], resamples: int, seed: int) -> list[np.ndarray]:
    """Index draws with replacement, each stratum resampled to its own size."""
    rng = np.random.default_rng(seed)
    return [
        np.concatenate([stratum[rng.integers(0, len(stratum), len(stratum))] for stratum in strata])
        for _ in range(resamples)
    ]


def _interval(values: list[float]) -> tuple[float, float]:
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
    draws = [statistic(i) for i in _resamples(_split(everything, strata), resamples, seed)]
    defined = [d for d in draws if d is not None]
    low, high = _interval(defined) if defined else (value, value)
    return Estimate(value, low, high, units)


def paired_difference(
    new: Statistic,
    current: Statistic,
    units: int,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Estimate | None:
    """new - current on the same units, each resample drawn once for both."""
    everything = np.arange(units)
    first, second = new(everything), current(everything)
    if first is None or second is None:
        return None
    differences = []
    for indices in _resamples([everything], resamples, seed):
        a, b = new(indices), current(indices)
        if a is not None and b is not None:
            differences.append(a - b)
    low, high = _interval(differences) if differences else (first - second, first - second)
    return Estimate(first - second, low, high, units)


def _split(indices: np.ndarray, strata: Sequence[int] | None) -> list[np.ndarray]:
    if strata is None:
        return [indices]
    labels = np.asarray(strata)
    return [indices[labels == label] for label in np.unique(labels)]


# Step AUROC


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
    """Labeled steps grouped by problem: per problem, P(-1) of each step and its rating."""

    negative_probability: list[np.ndarray]
    ratings: list[np.ndarray]

    def auroc_statistic(self) -> Statistic:
        def statistic(problems: np.ndarray) -> float | None:
            scores = np.concatenate([self.negative_probability[p] for p in problems])
            ratings = np.concatenate([self.ratings[p] for p in problems])
            return auroc(scores, ratings == -1)

        return statistic

    def shortage(self) -> str | None:
        """Why there is not enough data for a figure; None when there is."""
        ratings = np.concatenate(self.ratings) if self.ratings else np.zeros(0)
        negatives = int((ratings == -1).sum())
        others = len(ratings) - negatives
        if len(self.ratings) < MIN_PROBLEMS:
            return f"not enough data: {len(self.ratings)} held-out problems (needs {MIN_PROBLEMS})"
        if min(negatives, others) < MIN_STEPS_PER_CLASS:
            return (
                f"not enough data: {negatives} negative and {others} other held-out steps "
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


# ProcessBench


def first_error(labels: Sequence[int | None]) -> int:
    """Index of the first negative step, or -1 when there is none."""
    return next((i for i, label in enumerate(labels) if label is not None and label < 0), -1)


def predicted_first_error(step_scores: Sequence[float], threshold: float) -> int:
    return next((i for i, score in enumerate(step_scores) if score < threshold), -1)


@dataclass(frozen=True)
class FirstErrorWindow:
    """For one solution, the thresholds at which the predicted first error is the labeled one.

    Scores are P(step is fine). With ``t`` the threshold, a solution with its first error at
    ``e`` is judged right when step ``e`` scores below ``t`` and every earlier step at or
    above it: ``score[e] < t <= min(score[:e])``. A solution with no error is judged right
    when every step scores at or above ``t``: ``t <= min(score)``.
    """

    erroneous: bool
    above: float
    """The threshold must exceed this (-inf for a correct solution)."""
    up_to: float
    """...and be at most this."""

    @classmethod
    def of(cls, step_scores: Sequence[float] | np.ndarray, label: int) -> FirstErrorWindow:
        scores = np.asarray(step_scores, dtype=np.float64)
        if label < 0:
            return cls(False, -np.inf, float(scores.min()) if len(scores) else np.inf)
        earlier = float(scores[:label].min()) if label else np.inf
        return cls(True, float(scores[label]), earlier)


class FirstErrors:
    """Solutions with labeled first errors (-1: none) and their step scores, vectorized."""

    def __init__(
        self, step_scores: Sequence[Sequence[float] | np.ndarray], labels: Sequence[int]
    ) -> None:
        windows = [
            FirstErrorWindow.of(s, label) for s, label in zip(step_scores, labels, strict=True)
        ]
        self.erroneous = np.array([w.erroneous for w in windows], dtype=bool)
        self.above = np.array([w.above for w in windows])
        self.up_to = np.array([w.up_to for w in windows])

    def __len__(self) -> int:
        return len(self.erroneous)

    def hits(self, thresholds: float | np.ndarray) -> np.ndarray:
        """(thresholds, solutions): whether each solution is judged right at each threshold."""
        t = np.atleast_1d(np.asarray(thresholds, dtype=np.float64))[:, None]
        hits: np.ndarray = (self.above < t) & (t <= self.up_to)
        return hits

    def f1_statistic(self, threshold: float) -> Statistic:
        hits = self.hits(threshold)[0]

        def statistic(solutions: np.ndarray) -> float | None:
            return _f1(hits[solutions], self.erroneous[solutions])

        return statistic

    def accuracies(self, threshold: float) -> tuple[float | None, float | None]:
        """Accuracy on the erroneous and on the correct solutions."""
        hits = self.hits(threshold)[0]
        return _mean(hits[self.erroneous]), _mean(hits[~self.erroneous])


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def _f1(hits: np.ndarray, erroneous: np.ndarray) -> float | None:
    error_accuracy = _mean(hits[erroneous])
    correct_accuracy = _mean(hits[~erroneous])
    if error_accuracy is None or correct_accuracy is None:
        return None
    total = error_accuracy + correct_accuracy
    return 2 * error_accuracy * correct_accuracy / total if total else 0.0


def choose_threshold(solutions: FirstErrors) -> float:
    """The threshold with the best ProcessBench F1 on ``solutions`` (a calibration set).

    Candidates are the midpoints between the distinct window ends, where F1 can change;
    ties go to the threshold nearest 0.5.
    """
    edges = np.unique(np.concatenate([solutions.above, solutions.up_to]))
    edges = edges[np.isfinite(edges)]
    if len(edges) == 0:
        return 0.5
    candidates = np.concatenate(
        [[edges[0] - 1e-9], (edges[1:] + edges[:-1]) / 2, [edges[-1] + 1e-9]]
    )
    hits = solutions.hits(candidates)
    errors = solutions.erroneous
    scores = []
    for row in hits:
        f1 = _f1(row, errors)
        scores.append(-1.0 if f1 is None else f1)
    best = max(scores)
    ties = candidates[np.array(scores) == best]
    return float(ties[np.argmin(np.abs(ties - 0.5))])


def processbench_figures(
    subsets: dict[str, FirstErrors], threshold: float, seed: int = 0
) -> dict[str, Any]:
    """F1 and both accuracies per subset, and the mean F1 over subsets, with intervals."""
    figures: dict[str, Any] = {"threshold": threshold, "subsets": {}}
    for name, solutions in subsets.items():
        f1 = bootstrap(solutions.f1_statistic(threshold), len(solutions), seed=seed)
        error_accuracy, correct_accuracy = solutions.accuracies(threshold)
        figures["subsets"][name] = {
            "f1": f1.as_dict() if f1 else None,
            "accuracy_erroneous": error_accuracy,
            "accuracy_correct": correct_accuracy,
            "erroneous": int(solutions.erroneous.sum()),
            "correct": int((~solutions.erroneous).sum()),
        }
    mean = _mean_f1(subsets, threshold, seed)
    figures["f1"] = mean.as_dict() if mean else None
    return figures


def mean_f1_statistic(
    subsets: dict[str, FirstErrors], threshold: float
) -> tuple[Statistic, np.ndarray]:
    """ProcessBench's headline, the subsets' mean F1, as a statistic over all their
    solutions together; and the subset (stratum) of each solution."""
    names = list(subsets)
    hits = np.concatenate([subsets[name].hits(threshold)[0] for name in names])
    errors = np.concatenate([subsets[name].erroneous for name in names])
    strata = np.concatenate([np.full(len(subsets[name]), i) for i, name in enumerate(names)])

    def statistic(solutions: np.ndarray) -> float | None:
        parts = [solutions[strata[solutions] == i] for i in range(len(names))]
        values = [_f1(hits[part], errors[part]) for part in parts]
        defined = [v for v in values if v is not None]
        return float(np.mean(defined)) if len(defined) == len(values) else None

    return statistic, strata


def _mean_f1(subsets: dict[str, FirstErrors], threshold: float, seed: int) -> Estimate | None:
    """The subsets' mean F1, each subset resampled within itself."""
    if not subsets:
        return None
    statistic, strata = mean_f1_statistic(subsets, threshold)
    return bootstrap(statistic, len(strata), strata=strata.tolist(), seed=seed)


# Best-of-N


@dataclass(frozen=True)
class Sample:
    """One sampled solution of a problem: the PRM's score, its answer's group, correctness.

    ``answer_group`` numbers the answers the grader counts as equal (None: no answer).
    """

    score: float
    answer_group: int | None
    correct: bool


def _majority_correct(samples: Sequence[Sample]) -> bool:
    votes = Counter(s.answer_group for s in samples if s.answer_group is not None)
    if not votes:
        return False
    # Ties go to the answer seen first, so the figure does not depend on dict order.
    top = max(votes.values())
    group = next(g for g in (s.answer_group for s in samples) if g is not None and votes[g] == top)
    return next(s.correct for s in samples if s.answer_group == group)


def best_of_n(problems: Sequence[Sequence[Sample]], seed: int = 0) -> dict[str, Any]:
    """PRM pick, majority vote and random pick accuracy over problems, with intervals."""
    groups = [list(p) for p in problems if len(p) >= 2]
    if not groups:
        return {"status": "not enough data: no problem with two or more samples"}
    prm = np.array([max(g, key=lambda s: s.score).correct for g in groups], dtype=float)
    majority = np.array([_majority_correct(g) for g in groups], dtype=float)
    # A random pick's expected accuracy, exactly, rather than one noisy draw.
    random_pick = np.array([sum(s.correct for s in g) / len(g) for g in groups])
    figures: dict[str, Any] = {
        "status": "ok",
        "problems": len(groups),
        "mean_n": sum(len(g) for g in groups) / len(groups),
    }
    for name, per_problem in (("prm", prm), ("majority", majority), ("random", random_pick)):
        estimate = bootstrap(_mean_of(per_problem), len(groups), seed=seed)
        assert estimate is not None  # a mean over a non-empty draw
        figures[name] = estimate.as_dict()
    return figures


def _mean_of(values: np.ndarray) -> Statistic:
    return lambda units: float(values[units].mean())


# The gate


@dataclass(frozen=True)
class Comparison:
    """One metric computed for the new and the current PRM on the same units."""

    metric: str
    new: Statistic
    current: Statistic
    units: int


@dataclass(frozen=True)
class GateDecision:
    promote: bool
    reason: str
    metric: str | None = None
    new: Estimate | None = None
    current: Estimate | None = None
    difference: Estimate | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "promote": self.promote,
            "reason": self.reason,
            "metric": self.metric,
            "new": self.new.as_dict() if self.new else None,
            "current": self.current.as_dict() if self.current else None,
            "difference": self.difference.as_dict() if self.difference else None,
        }


def gate(
    comparisons: Sequence[Comparison],
    *,
    labels_used: int,
    min_labels: int,
    has_current: bool,
    seed: int = 0,
) -> GateDecision:
    """Whether the new PRM replaces the current one.

    It must have trained on at least ``min_labels`` labels. Then it replaces the current
    one unless it is worse beyond chance on the first metric (in the order given) that
    both can be judged on: the paired bootstrap's 95% interval of new - current lies
    wholly below zero.
    """
    if labels_used < min_labels:
        return GateDecision(False, f"trained on {labels_used} labels; needs {min_labels}")
    if not has_current:
        return GateDecision(True, "first model")
    for comparison in comparisons:
        decision = _judge(comparison, seed)
        if decision is not None:
            return decision
    return GateDecision(False, "kept the current model: no metric could compare the two")


def _judge(comparison: Comparison, seed: int) -> GateDecision | None:
    new = bootstrap(comparison.new, comparison.units, seed=seed)
    current = bootstrap(comparison.current, comparison.units, seed=seed)
    difference = paired_difference(comparison.new, comparison.current, comparison.units, seed=seed)
    if new is None or current is None or difference is None:
        return None
    worse = difference.high < 0
    verdict = "kept the current model" if worse else "promoted"
    reason = (
        f"{verdict}: {comparison.metric} {_show(new)} against {_show(current)} "
        f"(difference {_show(difference, signed=True)})"
    )
    return GateDecision(not worse, reason, comparison.metric, new, current, difference)


def _show(estimate: Estimate, signed: bool = False) -> str:
    form = "+.3f" if signed else ".3f"
    return f"{estimate.value:{form}} [{estimate.low:{form}}, {estimate.high:{form}}]"


def selection_yield(selected_correctness: Sequence[bool | None]) -> float | None:
    """Share of the selected solutions whose final answer was graded wrong."""
    graded = [c for c in selected_correctness if c is not None]
    return sum(not c for c in graded) / len(graded) if graded else None
