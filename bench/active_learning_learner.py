"""bench/active_learning.py's PRM, through the worker's code, and its judging on the test
(or calibration) problems: each snapshot's figures as bootstrap statistics.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from app.estimates import Statistic
from bench.active_learning_data import Data
from bench.prm_quality_data import examples
from bench.prm_quality_training import HEADS
from worker import evaluate
from worker.assess import step_set
from worker.eval_sets import ProcessBenchItem
from worker.features import FeatureCache, cache_for
from worker.model import PRM
from worker.score import Throughput, fill_cache, member_probabilities, solution_score, step_features
from worker.select import Candidate, uncertainty_of
from worker.train import Example, fit, setup
from worker.training_args import TrainingArgs, training_args_for

MODEL_SEED = 0
"""The head's initialization and batch order, fixed: a seed changes only what is labeled."""
LEARNER_HEAD = "all-x5"
"""The learner's head: the worker's default reads the same features with five MLP members,
which retrain 560 times in a 10-seed run in hours on 2 cores; five linear members, in under
one (BENCHMARKS.md, issue 24). An ensemble either way, for the uncertainty strategies."""


@dataclass
class Learner:
    """The PRM: the worker's model, in head mode with its feature cache (the CPU default,
    with the worker's default head or one of bench/prm_quality.py's), or in full or lora
    mode (a GPU's), retrained from the pretrained weights every round."""

    model: PRM
    tokenizer: PreTrainedTokenizerBase
    args: TrainingArgs
    cache: FeatureCache | None
    device: torch.device

    @classmethod
    def load(cls, options: argparse.Namespace) -> Learner:
        """The same model for every seed: it starts alike, and only the labels vary."""
        head = HEADS[options.head] if options.head and options.mode == "head" else {}
        args = training_args_for(
            options.base_model,
            mode=options.mode,
            device=options.device,
            epochs=options.epochs,
            seed=MODEL_SEED,
            **head,
        )
        model, tokenizer, resolved = setup(args)
        cache = cache_for(model, args, options.cache_dir, remember=True)
        return cls(model, tokenizer, args, cache, resolved)

    @property
    def described(self) -> str:
        """The mode, the head and the device, as the figures record them."""
        name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
        if self.args.mode != "head":
            return f"{self.args.mode} on {name}"
        head = self.args
        shape = f"MLP {head.head_hidden}" if head.head_hidden else "linear"
        return (
            f"head on {name}: {head.head_members} {shape} member(s) reading "
            f"{', '.join(head.head_readings)}"
        )

    def warm(self, data: Data, progress: Progress, judge: str = "test") -> Throughput:
        """Put every sequence the runs will read into the cache: every whole solution (the
        test problems' only where they are judged), then the labeled paths (a path that
        stops at an error is a step prefix of its solution, read from it for free)."""
        tests = data.split.test if judge == "test" else []
        everything = [*data.pool, *data.split.calibration, *tests, *data.held_out]
        items = [(i.problem, i.steps) for i in everything]
        items += [(e.problem, e.steps) for e in data.examples]
        if self.cache is None:  # full or lora: the backbone trains, nothing to cache
            return Throughput(0, 0, 0, 0.0)

        def report(done: int, throughput: Throughput) -> None:
            progress.line(
                f"features: {done} of {len(items)} sequences, "
                f"{throughput.tokens_per_second:.0f} tokens/s"
            )

        return fill_cache(self.model, self.tokenizer, items, self.args, self.cache, report)

    def fit(self, examples: list[Example]) -> None:
        """Train from scratch on ``examples``: a new head on the frozen backbone, or in the
        other modes the whole model from its pretrained weights, as in the paper's rounds."""
        if self.args.mode != "head":
            self.model = setup(self.args)[0]
        fit(self.model, self.tokenizer, examples, self.args, cache=self.cache)

    def features(self, items: Sequence[ProcessBenchItem]) -> list[np.ndarray]:
        pairs = [(i.problem, i.steps) for i in items]
        return step_features(self.model, self.tokenizer, pairs, self.args, self.cache)[0]

    def probabilities(self, items: Sequence[ProcessBenchItem]) -> list[np.ndarray]:
        members = member_probabilities(self.model.head, self.features(items))
        return [p.mean(axis=0) for p in members]

    def candidates(self, data: Data, unlabeled: list[int]) -> list[Candidate]:
        """The unlabeled pool solutions as the selection sees them: the score and the
        uncertainties of the head's members, and where each sits in feature space."""
        features = self.features([data.pool[i] for i in unlabeled])
        members = member_probabilities(self.model.head, features)
        candidates = []
        for index, solution, probabilities in zip(unlabeled, features, members, strict=True):
            scored = solution_score(probabilities)
            candidates.append(
                Candidate(
                    solution_id=index,
                    problem_id=data.problems[index],
                    score=scored.score,
                    answer_correct=data.pool[index].final_answer_correct,
                    uncertainty=uncertainty_of(np.array(scored.member_step_scores)),
                    embedding=self.model.head.embedding(solution),
                )
            )
        return candidates


def remembered(statistic: Statistic) -> Statistic:
    """The statistic, computed once per draw: every bootstrap here draws the same resamples
    (the same units and seed), so each model is judged once on each."""
    values: dict[bytes, float | None] = {}

    def statistic_once(units: np.ndarray) -> float | None:
        key = hashlib.blake2b(units.tobytes(), digest_size=16).digest()
        if key not in values:
            values[key] = statistic(units)
        return values[key]

    return statistic_once


@dataclass(frozen=True)
class Snapshot:
    """The PRM trained on ``labels`` labeled solutions, judged on the test problems (or on
    the calibration problems, to choose by)."""

    labels: int
    negatives: int
    """Labeled solutions with an error (a -1 step)."""
    threshold: float
    f1: Statistic
    f1_strata: list[int]
    """The subset of each test solution (F1 is resampled within subsets)."""
    auroc: Statistic | None
    """None where the test steps are too few (``StepSet.shortage``)."""
    problems: int
    pool_f1: Statistic | None = None
    pool_strata: list[int] = field(default_factory=list)
    pool_auroc: Statistic | None = None
    pool_problems: int = 0
    """The same on the held-out pool problems, by the simulated labeler (bon32 only)."""

    def statistic(self, figure: str) -> Statistic | None:
        return {
            "f1": self.f1,
            "auroc": self.auroc,
            "pool_f1": self.pool_f1,
            "pool_auroc": self.pool_auroc,
        }[figure]

    def units(self, figure: str) -> tuple[int, list[int] | None]:
        """How many units the figure's bootstrap draws, and their strata."""
        if figure == "f1":
            return len(self.f1_strata), self.f1_strata
        if figure == "pool_f1":
            return len(self.pool_strata), self.pool_strata
        return (self.pool_problems if figure == "pool_auroc" else self.problems), None

    def value(self, figure: str) -> float | None:
        statistic = self.statistic(figure)
        units = self.units(figure)[0]
        return None if statistic is None else statistic(np.arange(units))


@dataclass(frozen=True)
class Judged:
    """What a snapshot is made of, in plain arrays that a worker process can send back: the
    labels so far, how many of them hold an error, and the PRM's class probabilities on the
    judged solutions (the calibration ones first)."""

    labels: int
    negatives: int
    probabilities: list[np.ndarray]


def judged(learner: Learner, data: Data, labeled: list[int], judge: str) -> Judged:
    """The PRM read on the calibration and test problems; with ``judge="calibration"`` on
    the calibration problems alone, never reading a test problem."""
    calibration = data.split.calibration
    solutions = calibration if judge == "calibration" else [*calibration, *data.split.test]
    solutions = [*solutions, *data.held_out]
    negatives = sum(data.pool[i].label >= 0 for i in labeled)
    return Judged(len(labeled), negatives, learner.probabilities(solutions))


def snapshot(reading: Judged, data: Data, judge: str) -> Snapshot:
    """Judged on the test problems, the threshold chosen on the calibration problems (or on
    the calibration problems alone, the threshold too)."""
    calibration = data.split.calibration
    test = calibration if judge == "calibration" else data.split.test
    probabilities = reading.probabilities
    step_scores = [solution_score(p).step_scores for p in probabilities]
    threshold = evaluate.choose_threshold(
        evaluate.FirstErrors(step_scores[: len(calibration)], [i.label for i in calibration])
    )
    start = 0 if judge == "calibration" else len(calibration)
    end = start + len(test)
    f1, strata, auroc, problems = _judged_on(
        test, step_scores[start:end], probabilities[start:end], threshold
    )
    pool: dict[str, Any] = {}
    if data.held_out:
        pool_f1, pool_strata, pool_auroc, pool_problems = _judged_on(
            data.held_out, step_scores[end:], probabilities[end:], threshold
        )
        pool = {
            "pool_f1": pool_f1,
            "pool_strata": pool_strata,
            "pool_auroc": pool_auroc,
            "pool_problems": pool_problems,
        }
    return Snapshot(
        labels=reading.labels,
        negatives=reading.negatives,
        threshold=threshold,
        f1=f1,
        f1_strata=strata,
        auroc=auroc,
        problems=problems,
        **pool,
    )


def _judged_on(
    items: Sequence[ProcessBenchItem],
    step_scores: list[list[float]],
    probabilities: list[np.ndarray],
    threshold: float,
) -> tuple[Statistic, list[int], Statistic | None, int]:
    """F1 (the subsets' mean at ``threshold``) with its strata, and step AUROC (None where
    the steps are too few) with its problem count, on ``items``."""
    subsets = {
        name: evaluate.FirstErrors(
            [s for s, i in zip(step_scores, items, strict=True) if i.subset == name],
            [i.label for i in items if i.subset == name],
        )
        for name in dict.fromkeys(i.subset for i in items)
    }
    f1, strata = evaluate.mean_f1_statistic(subsets, threshold)
    steps = step_set(examples(items), probabilities)
    auroc = None if steps.shortage() else remembered(steps.auroc_statistic())
    return remembered(f1), strata.tolist(), auroc, len(steps.ratings)


class Progress:
    """One line per round on stderr, with the time since the bench began."""

    def __init__(self, out: TextIO = sys.stderr, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started
        self.out = out

    def line(self, text: str) -> None:
        print(f"[{time.perf_counter() - self.started:7.1f} s] {text}", file=self.out, flush=True)
