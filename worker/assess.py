"""Run a PRM over the evaluation sets and compute its figures (worker/evaluate.py's math).

The sets (``EvalSets``): labeled problems that training never saw (step AUROC), ProcessBench
(first-error F1, the threshold chosen on its calibration part) and independent samples
(best-of-N). Every solution of every set is scored in one pass, so batches stay full; in
``head`` mode a feature cache makes a set the backbone has seen cost nothing.

``Assessment.statistic`` gives the gate the per-unit figures of a metric (with ProcessBench's
subsets as strata, resampled within themselves as the figure shown is), so that a new and
the current PRM are compared on the same examples.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from transformers import PreTrainedTokenizerBase

from worker import evaluate
from worker.eval_sets import ProcessBenchItem, ProcessBenchSplit, SampledProblem
from worker.evaluate import FirstErrors, Sample, Statistic, StepSet
from worker.features import FeatureCache
from worker.model import PRM
from worker.score import solution_score, step_probabilities
from worker.split import problem_hash
from worker.train import Example
from worker.training_args import TrainingArgs

GATE_METRICS = ("step_auroc", "processbench_f1", "best_of_n")


@dataclass(frozen=True)
class EvalSets:
    held_out: list[Example] = field(default_factory=list)
    """Labeled examples of problems training never saw."""
    processbench: ProcessBenchSplit | None = None
    best_of_n: list[SampledProblem] = field(default_factory=list)
    """Independent samples from a file (``STEPLABEL_EVAL_DIR``)."""
    imported: list[SampledProblem] = field(default_factory=list)
    """Independent samples in the database (imported, hand-queued, control shares)."""

    def describe(self) -> dict[str, Any]:
        split = self.processbench
        return {
            "held_out_examples": len(self.held_out),
            "held_out_problems": len({e.problem_id for e in self.held_out}),
            "processbench_calibration": len(split.calibration) if split else 0,
            "processbench_test": len(split.test) if split else 0,
            "best_of_n_problems": len(self.best_of_n),
            "imported_sample_problems": len(self.imported),
        }

    def without(
        self, problems: Collection[str], reason: str
    ) -> tuple[EvalSets, list[dict[str, Any]]]:
        """These sets without every item on one of ``problems`` (``problem_hash`` of their
        text), and what each set lost, in its own unit, with ``reason``."""

        def kept(text: str) -> bool:
            return problem_hash(text) not in problems

        split = self.processbench
        sets = EvalSets(
            held_out=[e for e in self.held_out if kept(e.problem)],
            processbench=ProcessBenchSplit(
                [i for i in split.calibration if kept(i.problem)],
                [i for i in split.test if kept(i.problem)],
            )
            if split
            else None,
            best_of_n=[p for p in self.best_of_n if kept(p.problem)],
            imported=[p for p in self.imported if kept(p.problem)],
        )
        before, after = self.describe(), sets.describe()
        return sets, [
            {"set": name, "unit": unit, "count": before[size] - after[size], "reason": reason}
            for name, unit, size in LEAVE_OUT_UNITS
            if before[size] > after[size]
        ]


LEAVE_OUT_UNITS = (
    ("held_out", "problems", "held_out_problems"),
    ("processbench_calibration", "solutions", "processbench_calibration"),
    ("processbench_test", "solutions", "processbench_test"),
    ("best_of_n", "problems", "best_of_n_problems"),
    ("imported", "problems", "imported_sample_problems"),
)
"""Each set as the left-out counts name it, the unit counted, and its size in ``describe``."""


@dataclass
class Assessment:
    """One PRM's scores on the sets, and the figures computed from them."""

    held_out: StepSet
    processbench: dict[str, FirstErrors]
    """The test part per subset, at ``threshold``."""
    threshold: float | None
    best_of_n: list[list[Sample]]
    imported: list[list[Sample]]
    figures: dict[str, Any]

    def statistic(self, metric: str) -> Measured | None:
        """The metric as a statistic over its units; None where this assessment cannot
        compute it."""
        if metric == "step_auroc" and self.held_out.shortage() is None:
            return Measured(self.held_out.auroc_statistic(), len(self.held_out.ratings))
        if metric == "processbench_f1" and self.processbench and self.threshold is not None:
            statistic, strata = evaluate.mean_f1_statistic(self.processbench, self.threshold)
            return Measured(statistic, len(strata), tuple(strata.tolist()))
        if metric == "best_of_n" and self.best_of_n:
            picks = np.array([max(g, key=lambda s: s.score).correct for g in self.best_of_n])
            return Measured(lambda units: float(picks[units].mean()), len(picks))
        return None

    def shortage(self, metric: str) -> str:
        """Why this assessment has no ``metric``."""
        if metric == "step_auroc":
            return self.held_out.shortage() or "no held-out figure"
        return {"processbench_f1": "no ProcessBench set", "best_of_n": "no best-of-N samples"}[
            metric
        ]


class Measured(NamedTuple):
    """A metric as a statistic over units, and each unit's stratum where it has them."""

    statistic: Statistic
    units: int
    strata: tuple[int, ...] | None = None


def assess(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    args: TrainingArgs,
    sets: EvalSets,
    cache: FeatureCache | None = None,
    seed: int = 0,
) -> Assessment:
    """Score every set's solutions with the PRM and compute the figures."""
    batch = _Batch()
    held_out = batch.add([(e.problem, e.steps) for e in sets.held_out])
    split = sets.processbench
    calibration = batch.add(_items(split.calibration)) if split else None
    test = batch.add(_items(split.test)) if split else None
    best_of_n = batch.add(_samples(sets.best_of_n))
    imported = batch.add(_samples(sets.imported))
    probabilities, throughput = step_probabilities(model, tokenizer, batch.items, args, cache)
    steps = step_set(sets.held_out, held_out.of(probabilities))
    threshold = None
    subsets: dict[str, FirstErrors] = {}
    figures: dict[str, Any] = {
        "sets": sets.describe(),
        "step_auroc": evaluate.step_auroc(steps, seed),
        "tokens_per_second": throughput.tokens_per_second,
        "sequences_computed": throughput.sequences,
    }
    if split and calibration and test:
        calibrated = first_errors(split.calibration, calibration.of(probabilities))
        threshold = evaluate.choose_threshold(calibrated)
        subsets = by_subset(split.test, test.of(probabilities))
        figures["processbench"] = evaluate.processbench_figures(subsets, threshold, seed)
    bon = _sampled(sets.best_of_n, best_of_n.of(probabilities))
    own = _sampled(sets.imported, imported.of(probabilities))
    figures["best_of_n"] = evaluate.best_of_n(bon, seed) if bon else None
    figures["best_of_n_imported"] = evaluate.best_of_n(own, seed) if own else None
    return Assessment(steps, subsets, threshold, bon, own, figures)


@dataclass(frozen=True)
class _Span:
    start: int
    stop: int

    def of(self, values: list[np.ndarray]) -> list[np.ndarray]:
        return values[self.start : self.stop]


class _Batch:
    """Items of several sets in one list, each set remembering its span."""

    def __init__(self) -> None:
        self.items: list[tuple[str, list[str]]] = []

    def add(self, items: Sequence[tuple[str, list[str]]]) -> _Span:
        start = len(self.items)
        self.items.extend(items)
        return _Span(start, len(self.items))


def _items(solutions: Sequence[ProcessBenchItem]) -> list[tuple[str, list[str]]]:
    return [(s.problem, s.steps) for s in solutions]


def _samples(problems: Sequence[SampledProblem]) -> list[tuple[str, list[str]]]:
    return [(p.problem, steps) for p in problems for steps in p.samples]


def _fine(probabilities: np.ndarray) -> np.ndarray:
    """P(step is fine) = P(+1) + P(0), per step."""
    fine: np.ndarray = np.minimum(1.0, probabilities[:, 1] + probabilities[:, 2])
    return fine


def step_set(examples: Sequence[Example], probabilities: list[np.ndarray]) -> StepSet:
    """The examples' labeled steps grouped by problem, problems in order of appearance."""
    negative: dict[int, list[float]] = {}
    ratings: dict[int, list[int]] = {}
    for example, p in zip(examples, probabilities, strict=True):
        for index, rating in example.labeled:
            negative.setdefault(example.problem_id, []).append(float(p[index, 0]))
            ratings.setdefault(example.problem_id, []).append(rating)
    problems = list(negative)
    return StepSet(
        [np.array(negative[p]) for p in problems], [np.array(ratings[p]) for p in problems]
    )


def first_errors(
    solutions: Sequence[ProcessBenchItem], probabilities: list[np.ndarray]
) -> FirstErrors:
    return FirstErrors([_fine(p) for p in probabilities], [s.label for s in solutions])


def by_subset(
    solutions: Sequence[ProcessBenchItem], probabilities: list[np.ndarray]
) -> dict[str, FirstErrors]:
    subsets: dict[str, FirstErrors] = {}
    for name in dict.fromkeys(s.subset for s in solutions):
        chosen = [i for i, s in enumerate(solutions) if s.subset == name]
        subsets[name] = first_errors(
            [solutions[i] for i in chosen], [probabilities[i] for i in chosen]
        )
    return subsets


def _sampled(
    problems: Sequence[SampledProblem], probabilities: list[np.ndarray]
) -> list[list[Sample]]:
    scored = iter(probabilities)
    groups = []
    for problem in problems:
        groups.append(
            [
                Sample(solution_score(next(scored)).score, group, correct)
                for group, correct in zip(problem.groups(), problem.correct, strict=True)
            ]
        )
    return groups


def compare(
    new: Assessment,
    current: Assessment,
    order: Sequence[str],
) -> tuple[list[evaluate.Comparison], dict[str, str]]:
    """The metrics, in ``order``, that both assessments can compute on the same units; and
    why each other one cannot be compared."""
    comparisons = []
    missing = {}
    for metric in order:
        ours, theirs = new.statistic(metric), current.statistic(metric)
        if ours is None or theirs is None:
            missing[metric] = (new if ours is None else current).shortage(metric)
        elif ours[1:] != theirs[1:]:
            missing[metric] = "not on the same examples"
        else:
            comparisons.append(
                evaluate.Comparison(metric, ours.statistic, theirs.statistic, *ours[1:])
            )
    return comparisons, missing


def gate_order(primary: str) -> list[str]:
    """The primary metric first, then the others."""
    return [primary, *(m for m in GATE_METRICS if m != primary)]
