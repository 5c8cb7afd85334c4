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
- The gate: new minus current PRM on the same examples, each metric both can be judged on
  with a 95% interval (a paired bootstrap's standard error and Student's t); the new one
  must be not worse beyond a margin on any and better or equal on the primary one.

Pure numpy: the worker and the benchmarks call these on arrays they computed.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

# The bootstrap is the app's too (the PRM page's control figures); the names stay
# importable from here, where the benches and tests have always found them.
from app.estimates import LEVEL as LEVEL
from app.estimates import RESAMPLES as RESAMPLES
from app.estimates import Estimate as Estimate
from app.estimates import Statistic as Statistic
from app.estimates import StepSet as StepSet
from app.estimates import auroc as auroc
from app.estimates import bootstrap as bootstrap
from app.estimates import resample, split_units
from app.estimates import step_auroc as step_auroc


def paired_difference(
    new: Statistic,
    current: Statistic,
    units: int,
    *,
    strata: Sequence[int] | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Estimate | None:
    """new - current on the same units, with a 95% interval; None where it is undefined or
    there are too few units for an interval.

    Each resample is drawn once for both statistics (within ``strata``, as ``bootstrap``
    does). The interval is Student's t over the resampled differences' standard error,
    which is widened by sqrt(n / (n - k)) for n units in k strata and read with n - k
    degrees of freedom: for a mean that is the paired t interval, whose error rates hold
    at the demo's handful of problems, where the percentile interval is too narrow.
    """
    everything = np.arange(units)
    first, second = new(everything), current(everything)
    groups = split_units(everything, strata)
    freedom = units - len(groups)
    if first is None or second is None or freedom < 1:
        return None
    differences = []
    for indices in resample(groups, resamples, seed):
        a, b = new(indices), current(indices)
        if a is not None and b is not None:
            differences.append(a - b)
    value = first - second
    if len(differences) < 2:
        return Estimate(value, value, value, units)
    error = float(np.std(differences, ddof=1)) * np.sqrt(units / freedom)
    half = t_quantile(1 - (1 - LEVEL) / 2, freedom) * error
    return Estimate(value, value - half, value + half, units)


def t_quantile(probability: float, freedom: int) -> float:
    """Student's t quantile, from the normal one by the Cornish-Fisher expansion
    (Abramowitz and Stegun 26.7.5): within 0.004 of the exact value from 3 degrees of
    freedom on."""
    z = NormalDist().inv_cdf(probability)
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(term / float(freedom) ** (power + 1) for power, term in enumerate(terms))


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

    def hits_at(self, thresholds: np.ndarray) -> np.ndarray:
        """Whether each solution is judged right at its own threshold (one per solution)."""
        judged: np.ndarray = (self.above < thresholds) & (thresholds <= self.up_to)
        return judged

    def subset(self, chosen: np.ndarray) -> FirstErrors:
        """The solutions ``chosen`` (a boolean mask or indices) picks."""
        picked = copy.copy(self)
        picked.erroneous = self.erroneous[chosen]
        picked.above = self.above[chosen]
        picked.up_to = self.up_to[chosen]
        return picked

    def f1_statistic(self, threshold: float) -> Statistic:
        hits = self.hits(threshold)[0]

        def statistic(solutions: np.ndarray) -> float | None:
            return f1_from_hits(hits[solutions], self.erroneous[solutions])

        return statistic

    def accuracies(self, threshold: float) -> tuple[float | None, float | None]:
        """Accuracy on the erroneous and on the correct solutions."""
        hits = self.hits(threshold)[0]
        return _mean(hits[self.erroneous]), _mean(hits[~self.erroneous])


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def f1_from_hits(hits: np.ndarray, erroneous: np.ndarray) -> float | None:
    """ProcessBench F1 of judgments (``hits``: whether each solution was judged right); None
    when the solutions lack an erroneous or a correct one."""
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
        f1 = f1_from_hits(row, errors)
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
        values = [f1_from_hits(hits[part], errors[part]) for part in parts]
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
    strata: Sequence[int] | None = None
    """Each unit's stratum (ProcessBench's subset), resampled within itself."""


@dataclass(frozen=True)
class Judgement:
    """One metric's verdict: the two PRMs' figures and the paired difference."""

    metric: str
    new: Estimate
    current: Estimate
    difference: Estimate
    passed: bool
    verdict: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "new": self.new.as_dict(),
            "current": self.current.as_dict(),
            "difference": self.difference.as_dict(),
            "passed": self.passed,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class GateDecision:
    promote: bool
    reason: str
    metric: str | None = None
    """The metric that decided: the first that failed, else the primary one."""
    new: Estimate | None = None
    current: Estimate | None = None
    difference: Estimate | None = None
    primary: str | None = None
    """The metric that must be better or equal: the configured one where it is judged,
    else the first judged one."""
    margin: float | None = None
    judged: tuple[Judgement, ...] = ()
    not_judged: dict[str, str] = field(default_factory=dict)
    """Metrics that could not be compared, and why."""
    error: str | None = None
    """Why the gate could not work at all (the current checkpoint is missing, say)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "promote": self.promote,
            "reason": self.reason,
            "metric": self.metric,
            "new": self.new.as_dict() if self.new else None,
            "current": self.current.as_dict() if self.current else None,
            "difference": self.difference.as_dict() if self.difference else None,
            "primary": self.primary,
            "margin": self.margin,
            "judged": [j.as_dict() for j in self.judged],
            "not_judged": dict(self.not_judged),
            "error": self.error,
        }


BELOW = "below the current model's"


def gate(
    comparisons: Sequence[Comparison],
    *,
    primary: str,
    margin: float,
    has_current: bool,
    not_judged: Mapping[str, str] | None = None,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> GateDecision:
    """Whether the new PRM replaces the current one.

    Every metric both can be judged on (``comparisons``, in order) must be not worse beyond
    ``margin``: the lower end of the paired difference's 95% interval (new - current) lies
    above ``-margin``. And the primary metric must be better or equal: its difference is at
    least 0. So a model worse by the margin on any metric is promoted about 2.5% of the
    time or less, and where there are too few examples to tell, the current model stays.
    """
    if not has_current:
        return GateDecision(True, "first model", margin=margin)
    why_not = dict(not_judged or {})
    judged = []
    for comparison in comparisons:
        judgement = _judge(comparison, margin, seed, resamples)
        if judgement is None:
            why_not[comparison.metric] = "undefined on these units"
        else:
            judged.append(judgement)
    if not judged:
        return GateDecision(
            False,
            "kept the current model: no metric could compare the two",
            margin=margin,
            not_judged=why_not,
        )
    lead = next((j for j in judged if j.metric == primary), judged[0])
    if lead.passed and lead.difference.value < 0:
        lead = dataclasses.replace(lead, passed=False, verdict=BELOW)
    judged = [lead if j.metric == lead.metric else j for j in judged]
    deciding = next((j for j in [lead, *judged] if not j.passed), lead)
    if deciding.passed:
        worse = f"worse beyond the margin {margin:.3f}"
        reason = f"promoted: {_describe(deciding)}; no judged metric {worse}"
    else:
        reason = f"kept the current model: {_describe(deciding)}: {deciding.verdict}"
    return GateDecision(
        deciding.passed,
        reason,
        deciding.metric,
        deciding.new,
        deciding.current,
        deciding.difference,
        primary=lead.metric,
        margin=margin,
        judged=tuple(judged),
        not_judged=why_not,
    )


def _judge(comparison: Comparison, margin: float, seed: int, resamples: int) -> Judgement | None:
    units, strata = comparison.units, comparison.strata
    new = bootstrap(comparison.new, units, strata=strata, resamples=resamples, seed=seed)
    current = bootstrap(comparison.current, units, strata=strata, resamples=resamples, seed=seed)
    difference = paired_difference(
        comparison.new, comparison.current, units, strata=strata, resamples=resamples, seed=seed
    )
    if new is None or current is None or difference is None:
        return None
    passed = difference.low > -margin
    verdict = "not worse" if passed else "worse"
    verdict += f" beyond the margin {margin:.3f}" + ("" if passed else " not ruled out")
    return Judgement(comparison.metric, new, current, difference, passed, verdict)


def _describe(judgement: Judgement) -> str:
    return (
        f"{judgement.metric} {_show(judgement.new)} against {_show(judgement.current)} "
        f"(difference {_show(judgement.difference, signed=True)})"
    )


def _show(estimate: Estimate, signed: bool = False) -> str:
    form = "+.3f" if signed else ".3f"
    return f"{estimate.value:{form}} [{estimate.low:{form}}, {estimate.high:{form}}]"


def selection_yield(selected_correctness: Sequence[bool | None]) -> float | None:
    """Share of the selected solutions whose final answer was graded wrong."""
    graded = [c for c in selected_correctness if c is not None]
    return sum(not c for c in graded) / len(graded) if graded else None
