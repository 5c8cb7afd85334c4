"""Active learning, measured: does labeling convincing wrong answers buy more PRM per label?

    .venv/bin/python -m bench.active_learning --json test-artifacts/active_learning.json
    .venv/bin/python -m bench.active_learning --wrong-share 0.5   # or --batch 0, --per-problem 2
    .venv/bin/python -m bench.active_learning --model tiny --per-subset 15 --seed-size 6 \\
        --budgets 10,14 --batch 3 --seeds 2 --cache-dir /tmp/tiny-features   # seconds

From an empty feature cache the first prints its table in about 37 minutes on 2 cores of
an AMD EPYC without AMX, 19 of them SmolLM2's features (cached: later runs take about 18);
BENCHMARKS.md, issue 24.

The data: ProcessBench (../shared/data, or ``--data``), split by problem exactly as
bench/prm_quality.py splits it (its ``split``, seed 0): its training problems are the pool
that strategies pick from, its calibration problems choose the first-error threshold, and
its test problems (half of all) are only ever judged on: never labeled, never used to
choose anything. So the SmolLM2 step features that bench cached cover every solution here.
By default only the gsm8k and math subsets (1,400 of the 3,400 solutions: a pool of 538,
150 calibration, 712 test), the ones it caches: the other two hold 1.9M more tokens, about
50 minutes of SmolLM2 on that CPU before the first round (``--subsets`` takes all four;
``python -m bench.features`` caches them ahead).

The labelers are simulated: a solution picked for labeling reveals its expert labels,
written as the PRM800K record a labeler would produce (a rated completion per step, the
path ending at the first error) and turned into its training example by the worker's own
``examples_from_record`` (worker/data.py), checked against the item's labels.

Each seed (``--seeds``, default 10; a seed changes the uniform seed set and the random
strategies' draws, never the split nor the head's initialization): ``--seed-size`` (50)
pool solutions chosen uniformly are labeled and the PRM trained on them (worker/train.py
``fit`` in ``head`` mode: SmolLM2-135M's frozen features from the shared feature cache, a
linear head retrained from scratch on every label so far; with ``--mode full`` or
``lora``, the whole PRM fine-tuned from its pretrained weights on every label so far, as
the paper retrained, on a GPU where there is one, ``--device``; the mode and device are
recorded with the figures). Then, in rounds, the PRM scores
the unlabeled pool (worker/score.py ``step_probabilities``, ``solution_score``;
``first_error_entropy``), the strategy picks the next solutions with worker/select.py
``select``, they are labeled and the PRM is retrained. A round labels ``--batch`` (50)
solutions, fewer where that would step over the next of ``--budgets`` (100, 200, 400:
cumulative labels, the seed set included), so that every strategy is judged at exactly
each budget; ``--batch 0`` goes to the next budget in one round. The batch is one
``SelectionPlan`` over the whole pool (``global_top_k``: nearly every pool problem has a
single solution, so picking K per problem would mean picking problems), or with
``--per-problem K``, K per problem, problems taken in the strategy's order up to the batch
(``max_size``). The strategies are worker/select.py's: ``uniform``; ``convincing_wrong``
(``--wrong-share`` of the batch the highest-scored solutions whose final answer is wrong,
the rest the highest-scored others); ``random_wrong`` (the same share of wrong answers, at
random); ``uncertain`` (the largest entropy of the first-error prediction); and the
uncertainty and diversity rules the module lists (``STRATEGIES``).

Seeds run side by side in ``--workers`` processes, by default one per CPU core in ``head``
mode: a round's head is too small to share two threads (the rounds run on one), so a
second core would otherwise sit idle. A seed's runs depend on the seed alone, so the
figures are the same with any number of workers; only the wall time changes. For the same
reason a long run can be stopped and go on: with ``--resume FOLDER`` each finished seed is
kept there (bench/seed_store.py), and the same command started again runs only the seeds
it had not finished (other options in the same folder are refused).

Figures at each budget, on the test problems (worker/evaluate.py): ProcessBench F1 (the
subsets' mean; threshold chosen on the calibration problems) and step AUROC (P(-1) of the
labeled steps), each the mean over the seeds with a 95% bootstrap interval (test solutions
resampled within subsets for F1, test problems for AUROC; every seed's model judged on the
same draws) and the standard deviation over the seeds; negatives found per label (share
of the labeled solutions, seed set included, that contain an error, so carry a -1 step);
the seconds each strategy spent selecting, training and scoring the pool.

The headline, the data-efficiency ratio: how many labels uniform needs to reach a
strategy's figure at a budget, divided by that budget, reading uniform's mean curve
(the seed set and the budgets) linearly in log(labels) at its first crossing. Above 1 the
strategy buys more per label. Past the curve's end it is "beyond the largest budget" (and
at least largest / budget); uniform's own ratio is 1 by definition. Its interval comes from
the same test draws, its spread from the ratio of each seed against that seed's uniform.

bon32 (``--corpus bon32``, bench/bon32.py; BENCHMARKS.md, issue 39): the paper's regime,
32 sampled solutions per problem labeled by a simulated labeler that reads Qwen2.5-Math-PRM-7B's
step scores, ProcessBench's test problems left out. One half of its problems (``--half``:
``calibration`` to choose on, ``confirmation`` run once, the default) is a pool of
``--problems`` (64) problems at each of ``--samples`` (1, 8, 32) solutions per problem, one
run each, plus 16 held-out problems (8 solutions each) judged by the simulated labeler
beside ProcessBench. The seed set is one solution of each of ``--seed-size`` (16) problems,
rounds take ``--per-problem`` (2) per problem straight to each of ``--budgets`` (32, 48),
and every strategy but uniform runs with each of ``--selectors``: ``retrain`` (the PRM
retrained on every label picks each round) and ``fixed`` (the paper's: the seed set's PRM
scores the pool once and every round picks by that scoring). Its output: per N the tables,
a JSON file whose rows carry ``samples``, ``selector`` and ``primary: true`` at 32 and 48
labels with 32 samples, the rule's picks per N, the worker's ``default_strategy`` for such a
pool (app/pool_shape.py), and an SVG of each arm's ratio against samples per problem.

    nice -n 19 .venv/bin/python -m bench.active_learning --corpus bon32 --json PATH

Output: a markdown table on stdout, progress (one line per round) on stderr, an SVG of
both figures against labels (``--plot``, by default test-artifacts/active_learning.svg,
outside git) and, with ``--json``, every figure and each run's labeled solutions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from app.config import STRATEGIES, Strategy, get_settings
from app.content_keys import normalized_problem
from app.estimates import RESAMPLES, Statistic, percentile_interval, split_units
from app.models import FinishReason
from app.pool_shape import strategy_for_pool
from app.prm800k import completion_dict, dumps, parse_line, question_dict, record_dict, step_dict
from bench.bon32 import (
    BON32,
    HALVES,
    SAMPLES,
    Bon32Split,
    bon32_split,
    grades_file,
    load_bon32,
)
from bench.prm_quality import HEADS, SHARED_DATA, Split, examples, split
from bench.prmbench import SUBSET as PRMBENCH
from bench.prmbench import prmbench_without, problem_group
from bench.seed_store import SeedStore
from worker import evaluate
from worker.assess import step_set
from worker.data import examples_from_record
from worker.eval_sets import (
    PROCESSBENCH_SUBSETS,
    ProcessBenchItem,
    fixed_sample,
    load_processbench,
)
from worker.features import FeatureCache, cache_for
from worker.model import PRM
from worker.pretrained import resolve_base_model
from worker.score import (
    Throughput,
    fill_cache,
    member_probabilities,
    solution_score,
    step_features,
)
from worker.select import (
    Candidate,
    SelectionPlan,
    select,
    uncertainty_of,
)
from worker.split import split_key
from worker.train import Example, fit, setup
from worker.training_args import TrainingArgs, training_args_for

REFERENCE: Strategy = "uniform"
"""The strategy the others are measured against."""
SEED_ROW = "seed set (all)"
WHOLE_POOL_ROW = f"{REFERENCE}, the whole pool"
"""The summary's rows that are not a strategy's: the seed set, and uniform on to the pool."""
FIGURES = {"f1": "ProcessBench F1", "auroc": "step AUROC"}
POOL_FIGURES = {"pool_f1": "held-out pool F1", "pool_auroc": "held-out pool step AUROC"}
"""bon32's second judge: its held-out problems, by the simulated labeler's labels."""
SPLIT_SEED = 0
TEST_SHARE = 0.5
"""bench/prm_quality.py's defaults: the same split, so its cached features cover it."""
LABELER = "00000000-0000-4000-8000-000000000000"
REVEALED_AT = datetime(2024, 1, 1)
"""Who and when, in the simulated labels' records."""
MODEL_SEED = 0
"""The head's initialization and batch order, fixed: a seed changes only what is labeled."""
DEFAULT_SUBSETS = ("gsm8k", "math")
"""The subsets whose SmolLM2 features bench/prm_quality.py caches (see the docstring)."""
DEFAULT_PLOT = Path("test-artifacts") / "active_learning.svg"
BON32_PROBLEMS = 64
BON32_HELD_OUT_PROBLEMS = 16
"""The default bon32 configuration's pool and held-out problems per half (half GSM8K,
half MATH-500): sized so that it runs from a cold feature cache in under an hour on 2 CPU
cores (BENCHMARKS.md, issue 39); ``--problems 0`` takes the whole half (a GPU's job)."""
BON32_SAMPLES = (1, 8, 32)
BON32_SEED_SIZE, BON32_BUDGETS, BON32_PER_PROBLEM = 16, "32,48", 2
BON32_STRATEGIES: tuple[Strategy, ...] = (
    "uniform",
    "convincing_wrong",
    "random_wrong",
    "uncertain",
    "ensemble",
)
"""The pre-registered five of issue 39: the reference, the paper's rule, its shape at random,
and the two uncertainty rules that did best in issue 24; each in both selectors."""
SELECTORS = ("retrain", "fixed")
"""How the selector is made: ``retrain``, the PRM retrained on every label so far picks
each round (this bench's loop); ``fixed``, the paper's (section 4.2): the PRM trained once
on the seed set scores the pool once, and every round picks by that one scoring."""
LEARNER_HEAD = "all-x5"
"""The learner's head: the worker's default reads the same features with five MLP members,
which retrain 560 times in a 10-seed run in hours on 2 cores; five linear members, in under
one (BENCHMARKS.md, issue 24). An ensemble either way, for the uncertainty strategies."""


# The labels a simulated labeler reveals


def labeled_record(item: ProcessBenchItem, ratings: Sequence[int]) -> dict[str, Any]:
    """A label of the item's first ``len(ratings)`` steps as a PRM800K record: one rated
    completion per step, chosen while it is no error, and the path ending at the first -1,
    as a labeler's does."""
    steps = [
        step_dict([completion_dict(text, rating, False)], None, 0 if rating >= 0 else None)
        for text, rating in zip(item.steps, ratings, strict=False)
    ]
    finish = FinishReason.FOUND_ERROR if -1 in ratings else FinishReason.SOLUTION
    return record_dict(
        labeler=LABELER,
        timestamp=REVEALED_AT,
        generation=None,
        is_quality_control=False,
        is_initial_screening=False,
        question=question_dict(item.problem, None, None, (item.steps, None, None)),
        steps=steps,
        total_time=None,
        finish_reason=finish.value,
    )


def revealed_record(item: ProcessBenchItem) -> dict[str, Any]:
    """The item's expert labels as a PRM800K record."""
    return labeled_record(item, [label for label in item.labels if label is not None])


def example_of(record: dict[str, Any]) -> Example:
    """The worker's training example of a one-path record, checked to be a PRM800K line."""
    parse_line(dumps(record))  # a valid PRM800K line, or this raises
    (example,) = examples_from_record(record)
    return example


def training_example(item: ProcessBenchItem) -> Example:
    """The worker's training example of the item's revealed labels, checked against them."""
    example = example_of(revealed_record(item))
    padded = example.labels + [None] * (len(item.steps) - len(example.steps))
    if example.steps != item.steps[: len(example.steps)] or padded != item.labels:
        raise ValueError(f"{item.id}: the record's example does not carry the item's labels")
    return example


@dataclass(frozen=True)
class Data:
    split: Split
    examples: list[Example]
    """The training example of each pool solution, in pool order."""
    problems: list[int]
    """The problem of each pool solution, as the selection groups them."""
    notes: dict[str, Any]
    """What the corpus is, and what was left out of it."""
    held_out: list[ProcessBenchItem] = field(default_factory=list)
    """Pool problems never picked from, judged by the simulated labeler (bon32)."""

    @property
    def pool(self) -> list[ProcessBenchItem]:
        return self.split.train


def load(options: argparse.Namespace) -> Data:
    """The corpus split by problem: ProcessBench's subsets, or PRMBench (its trajectories
    whose problem is a ProcessBench test problem left out)."""
    notes: dict[str, Any] = {"corpus": options.corpus}
    if options.corpus == BON32:
        return bon32_data(options)
    if options.corpus == PRMBENCH:
        items, dropped = prmbench_corpus(options.data, options.per_subset)
        notes["trajectories_dropped_as_processbench_test_problems"] = dropped
        parts = split(items, TEST_SHARE, SPLIT_SEED, problem_group)
        group = problem_group
    else:
        notes["subsets"] = options.subsets
        items = load_processbench(options.data, options.subsets.split(","))
        parts = split(fixed_sample(items, options.per_subset, SPLIT_SEED), TEST_SHARE, SPLIT_SEED)
        group = _problem_text
    test_problems = {group(i) for i in parts.test}
    if any(group(i) in test_problems for i in parts.train):
        raise ValueError("a test problem is in the pool")
    return Data(
        parts,
        [training_example(i) for i in parts.train],
        [split_key(group(i)) for i in parts.train],
        notes,
    )


def bon32_data(options: argparse.Namespace) -> Data:
    """One half of bon32 (``--half``): its pool at ``--samples`` solutions per problem and
    its held-out problems, judged beside ProcessBench's gsm8k and math subsets split as
    every other table splits them (its calibration problems choose the threshold)."""
    corpus = load_bon32(options.data, grades_file(options.data))
    problems = options.problems or None
    parts: Bon32Split = bon32_split(
        corpus, options.half, options.samples, problems, problems and BON32_HELD_OUT_PROBLEMS
    )
    processbench = load_processbench(options.data, list(DEFAULT_SUBSETS))
    judged = split(processbench, TEST_SHARE, SPLIT_SEED)
    pool = [s.item for s in parts.pool]
    tests = {normalized_problem(i.problem) for i in judged.test}
    if any(normalized_problem(i.problem) in tests for i in pool):
        raise ValueError("a ProcessBench test problem is in the pool")
    notes = {
        **corpus.notes,
        "half": options.half,
        "samples_per_problem": options.samples,
        "pool_problems": len({s.problem_id for s in parts.pool}),
        "held_out_problems": len({s.problem_id for s in parts.held_out}),
        "held_out_solutions": len(parts.held_out),
    }
    return Data(
        Split(pool, judged.calibration, judged.test),
        [training_example(i) for i in pool],
        [split_key(s.problem_id) for s in parts.pool],
        notes,
        [s.item for s in parts.held_out],
    )


def prmbench_corpus(data: Path, trajectories: int | None) -> tuple[list[ProcessBenchItem], int]:
    """PRMBench without the trajectories whose problem is a ProcessBench test problem (and
    how many those were), or a fixed sample of ``trajectories`` of the rest."""
    tests = split(load_processbench(data), TEST_SHARE, SPLIT_SEED).test
    return prmbench_without(data, {normalized_problem(i.problem) for i in tests}, trajectories)


def _problem_text(item: ProcessBenchItem) -> str:
    return item.problem


# The PRM, through the worker's code


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


# Judging a PRM on the test problems


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


# The rounds


@dataclass(frozen=True)
class Schedule:
    seed_size: int
    budgets: tuple[int, ...]
    batch: int | None
    """Labels per round; None: each round goes to the next budget."""

    @property
    def sizes(self) -> tuple[int, ...]:
        """Where every strategy is judged: the seed set, then each budget."""
        return (self.seed_size, *self.budgets)

    def next_size(self, labeled: int) -> int:
        budget = next(b for b in self.budgets if b > labeled)
        return budget if self.batch is None else min(budget, labeled + self.batch)


@dataclass
class Run:
    """One strategy from one seed set: what it labeled, in order, and its PRM at each size."""

    seed: int
    strategy: Strategy
    labeled: list[int]
    judged: dict[int, Judged]
    selector: str = "retrain"
    """``SELECTORS``: who picks each round."""
    rescorings: int = 0
    """How often the selector scored the pool again after the seed set (0: fixed)."""
    seconds: float = 0.0
    """Selecting, training and scoring the pool, all rounds (the seed set's not counted)."""
    rounds: int = 0
    snapshots: dict[int, Snapshot] = field(default_factory=dict)
    """``judged``, judged: filled in the main process (a snapshot's statistics are
    closures, which do not travel between processes)."""

    @property
    def arm(self) -> str:
        return arm_name(self.strategy, self.selector)


def arm_name(strategy: Strategy, selector: str) -> str:
    """A strategy with its selector, as the rows name it: the retrained one (this bench's
    loop, the worker's) by the strategy's name alone; uniform reads no score, so it has one."""
    return strategy if selector == "retrain" or strategy == REFERENCE else f"{strategy}, fixed"


def arms(options: argparse.Namespace) -> list[tuple[Strategy, str]]:
    """Every (strategy, selector) a seed runs: uniform once, the others once per selector."""
    return [
        (strategy, selector)
        for strategy in options.strategies
        for selector in options.selectors
        if strategy != REFERENCE or selector == options.selectors[0]
    ]


@dataclass(frozen=True)
class Start:
    """A seed's labeled seed set, its PRM's snapshot and its scores of the rest of the pool."""

    seed: int
    labeled: list[int]
    judged: Judged
    candidates: list[Candidate]
    seconds: float


class Progress:
    """One line per round on stderr, with the time since the bench began."""

    def __init__(self, out: TextIO = sys.stderr, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started
        self.out = out

    def line(self, text: str) -> None:
        print(f"[{time.perf_counter() - self.started:7.1f} s] {text}", file=self.out, flush=True)


def plan_for(
    strategy: Strategy, size: int, options: argparse.Namespace, seed: int
) -> SelectionPlan:
    """One round's plan: ``size`` solutions over the whole pool, or K per problem up to it."""
    if options.per_problem:
        return SelectionPlan(
            strategy, options.per_problem, options.wrong_share, max_size=size, seed=seed
        )
    return SelectionPlan(strategy, wrong_share=options.wrong_share, global_top_k=size, seed=seed)


def start(learner: Learner, data: Data, seed: int, options: argparse.Namespace) -> Start:
    started = time.perf_counter()
    labeled = seed_set(data, seed, options.schedule.seed_size, options.corpus == BON32)
    learner.fit([data.examples[i] for i in labeled])
    unlabeled = sorted(set(range(len(data.pool))) - set(labeled))
    candidates = learner.candidates(data, unlabeled)
    seconds = time.perf_counter() - started
    return Start(seed, labeled, judged(learner, data, labeled, options.judge), candidates, seconds)


def seed_set(data: Data, seed: int, size: int, one_per_problem: bool) -> list[int]:
    """The seed's uniform seed set: ``size`` pool solutions, or in the paper's shape
    (``one_per_problem``) one solution of each of ``size`` problems."""
    rng = random.Random(seed)
    if not one_per_problem:
        return rng.sample(range(len(data.pool)), size)
    by_problem: dict[int, list[int]] = {}
    for index, problem in enumerate(data.problems):
        by_problem.setdefault(problem, []).append(index)
    if size > len(by_problem):
        raise ValueError(f"a seed set of {size} problems, of {len(by_problem)}")
    return [rng.choice(by_problem[p]) for p in rng.sample(sorted(by_problem), size)]


def grow(
    learner: Learner,
    data: Data,
    strategy: Strategy,
    begun: Start,
    options: argparse.Namespace,
    progress: Progress,
    selector: str = "retrain",
) -> Run:
    """Label round after round by ``strategy`` from the seed set up to the largest budget:
    each round picked by the PRM retrained on every label so far (``retrain``), or by the
    seed set's PRM's one scoring of the pool (``fixed``, the paper's selector), while the
    PRM that is judged is retrained on every label either way."""
    schedule: Schedule = options.schedule
    run = Run(
        begun.seed, strategy, list(begun.labeled), {len(begun.labeled): begun.judged}, selector
    )
    candidates = begun.candidates
    while len(run.labeled) < schedule.budgets[-1]:
        started = time.perf_counter()
        size = schedule.next_size(len(run.labeled)) - len(run.labeled)
        plan = plan_for(strategy, size, options, run.seed * 10_000 + run.rounds)
        chosen = select(candidates, plan)
        if len(chosen) != size or set(chosen) & set(run.labeled):
            raise RuntimeError(f"{strategy} chose {len(chosen)} of {size}, or labeled ones")
        run.labeled += chosen
        taken = set(run.labeled)
        unlabeled = [c.solution_id for c in candidates if c.solution_id not in taken]
        if selector == "fixed":
            candidates = [c for c in candidates if c.solution_id not in taken]
            # The judged PRM needs training only where it is judged; the selector, never.
            if len(run.labeled) in schedule.budgets:
                learner.fit([data.examples[i] for i in run.labeled])
        else:
            learner.fit([data.examples[i] for i in run.labeled])
            if len(run.labeled) < schedule.budgets[-1]:
                candidates = learner.candidates(data, unlabeled)
                run.rescorings += 1
        seconds = time.perf_counter() - started
        run.seconds += seconds
        run.rounds += 1
        figures = ""
        if len(run.labeled) in schedule.budgets:
            reading = judged(learner, data, run.labeled, options.judge)
            run.judged[len(run.labeled)] = reading
            figures = _figures(snapshot(reading, data, options.judge))
        progress.line(
            f"seed {run.seed} {run.arm}: {len(run.labeled)} labels, round {seconds:.1f} s{figures}"
        )
    return run


def _figures(shot: Snapshot) -> str:
    return f", F1 {_number(shot.value('f1'))}, AUROC {_number(shot.value('auroc'))}"


def seed_runs(
    learner: Learner, data: Data, seed: int, options: argparse.Namespace, progress: Progress
) -> tuple[float, list[Run]]:
    """Every strategy from one seed's seed set, and the seconds the seed set took."""
    begun = start(learner, data, seed, options)
    shot = snapshot(begun.judged, data, options.judge)
    progress.line(
        f"seed {seed}: seed set of {len(begun.labeled)} in {begun.seconds:.1f} s" + _figures(shot)
    )
    runs = [grow(learner, data, s, begun, options, progress, sel) for s, sel in arms(options)]
    return begun.seconds, runs


_IN_WORKER: dict[str, Any] = {}
"""A worker process's learner, data, options and progress, loaded once by ``_start_worker``."""


def _start_worker(options: argparse.Namespace, started: float) -> None:
    torch.set_num_threads(1)
    _IN_WORKER.update(
        learner=Learner.load(options),
        data=load(options),
        options=options,
        progress=Progress(started=started),
    )


def _seed_in_worker(seed: int) -> tuple[float, list[Run]]:
    return seed_runs(seed=seed, **_IN_WORKER)


def every_seed(
    learner: Learner, data: Data, options: argparse.Namespace, progress: Progress
) -> list[tuple[float, list[Run]]]:
    """``seed_runs`` for each seed, in order: here, or side by side in ``--workers``
    processes. A seed's runs depend on nothing but the seed (every draw is seeded from it,
    every head retrained from the same start), so the figures are the same either way, and
    with ``--resume`` the seeds a stopped run finished are taken from its folder."""
    store = SeedStore(options.resume, deciding_options(options)) if options.resume else None
    finished = {}
    if store is not None:
        found = {seed: store.load(seed) for seed in range(options.seeds)}
        finished = {seed: runs for seed, runs in found.items() if runs is not None}
        progress.line(f"{len(finished)} of {options.seeds} seeds from {options.resume}")
    todo = [seed for seed in range(options.seeds) if seed not in finished]
    for seed, runs in zip(todo, _run_seeds(learner, data, options, progress, todo), strict=True):
        finished[seed] = runs
        if store is not None:
            store.save(seed, runs)
    return [finished[seed] for seed in range(options.seeds)]


def _run_seeds(
    learner: Learner,
    data: Data,
    options: argparse.Namespace,
    progress: Progress,
    seeds: list[int],
) -> Iterator[tuple[float, list[Run]]]:
    """Each seed's ``seed_runs`` as it finishes, in order."""
    if options.workers == 1 or len(seeds) < 2:
        for seed in seeds:
            yield seed_runs(learner, data, seed, options, progress)
        return
    # Spawned, not forked: a fork would inherit the warm-up's thread pool mid-state.
    with ProcessPoolExecutor(
        min(options.workers, len(seeds)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(options, progress.started),
    ) as pool:
        yield from pool.map(_seed_in_worker, seeds)


RESULT_NEUTRAL = ("seeds", "workers", "resume", "json", "plot", "cache_dir")
"""Options that change no seed's runs: how many seeds, how they run, where output goes."""


def deciding_options(options: argparse.Namespace) -> dict[str, Any]:
    """The options a seed's runs depend on, as ``--resume`` compares them."""
    return {k: v for k, v in sorted(vars(options).items()) if k not in RESULT_NEUTRAL}


def compare(data: Data, options: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    """Every strategy from every seed's seed set; the runs and the setup's timings."""
    learner = Learner.load(options)
    progress.line(f"the PRM: {options.model}, {learner.described}")
    warmed = learner.warm(data, progress, options.judge)
    progress.line(f"features of {warmed.sequences} new sequences in {warmed.seconds:.1f} s")
    # Past the warm-up the backbone never runs: the rounds train a linear head on cached
    # features, whose tiny matrix products two threads slow ninefold on a busy machine.
    threads = torch.get_num_threads()
    if learner.args.mode == "head":
        torch.set_num_threads(1)
    runs: dict[str, list[Run]] = {arm_name(s, sel): [] for s, sel in arms(options)}
    starts = []
    # A seed's runs share its seed set's reading (one object, after a worker's pickling
    # too): judge it once, so that they share its snapshot and its bootstrap memo.
    shots: dict[int, Snapshot] = {}

    def judge(reading: Judged) -> Snapshot:
        if id(reading) not in shots:
            shots[id(reading)] = snapshot(reading, data, options.judge)
        return shots[id(reading)]

    for seconds, of_seed in every_seed(learner, data, options, progress):
        starts.append(round(seconds, 1))
        for run in of_seed:
            run.snapshots = {n: judge(reading) for n, reading in run.judged.items()}
            runs[run.arm].append(run)
    whole = None
    if len(data.pool) > options.schedule.budgets[-1]:
        # Uniform's curve goes on to the whole pool, the same labels for every seed: how
        # far past the largest budget it would take uniform to catch up stays measurable.
        everything = list(range(len(data.pool)))
        learner.fit([data.examples[i] for i in everything])
        whole = snapshot(judged(learner, data, everything, options.judge), data, options.judge)
        progress.line(f"the whole pool, {len(everything)} labels: F1 {_number(whole.value('f1'))}")
    torch.set_num_threads(threads)
    setup = {
        **data.notes,
        "judged_on": options.judge,
        "model": options.model,
        "mode": learner.args.mode,
        "device": learner.described,
        "feature_sequences_computed": warmed.sequences,
        "feature_seconds": round(warmed.seconds, 1),
        "workers": options.workers,
        "seed_set_seconds": starts,
    }
    return {"runs": runs, "setup": setup, "whole_pool": whole}


# Figures over the seeds

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


# Output


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def show_estimate(figure: dict[str, Any]) -> str:
    if figure.get("status") != "ok":
        return "n/a"
    return (
        f"{figure['value']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}] "
        f"(sd {figure['seed_sd']:.3f})"
    )


def show_ratio(ratio: dict[str, Any] | None) -> str:
    if not ratio:
        return ""
    if ratio.get("status") != "ok":
        return "n/a"
    if "cap" not in ratio:
        return "1 (reference)"
    floor, cap = ratio["floor"], ratio["cap"]
    value = {
        "beyond": f"> {cap:.2f} (beyond the largest budget)",
        "below": f"< {floor:.2f} (below the seed set)",
    }.get(ratio["reach"], f"{ratio['value']:.2f}")
    low = f"<= {floor:.2f}" if ratio["low"] <= floor else f"{ratio['low']:.2f}"
    high = f">= {cap:.2f}" if ratio["high"] >= cap else f"{ratio['high']:.2f}"
    seeds = ratio["per_seed"]
    return f"{value} [{low}, {high}] (seeds {min(seeds):.2f}-{max(seeds):.2f})"


PRIMARY_BUDGETS = (200, 400)
"""Where issue 24's primary figure reads the ratios, fixed before any run (BENCHMARKS.md)."""
PRIMARY_FIGURES = ("f1", "auroc")
BON32_PRIMARY_BUDGETS = (32, 48)
BON32_PRIMARY_SAMPLES = 32
BON32_CHOICE_FIGURES = ("f1", "auroc", "pool_f1", "pool_auroc")
"""Issue 39's, fixed before any run (BENCHMARKS.md): the ratios at 32 and 48 labels with 32
samples per problem; the choice reads ProcessBench's and the held-out pool's figures."""


def primary_figure(
    rows: list[dict[str, Any]],
    budgets: Sequence[int] = PRIMARY_BUDGETS,
    figures_read: Sequence[str] = PRIMARY_FIGURES,
) -> list[dict[str, Any]]:
    """Per strategy other than uniform, its ratios (uniform's labels per label) for F1 and
    step AUROC at each primary budget, and their geometric mean (None where a ratio is
    missing), highest first: the number the rule written before the runs reads."""
    references = {SEED_ROW, REFERENCE, WHOLE_POOL_ROW}
    strategies = dict.fromkeys(r["strategy"] for r in rows if r["strategy"] not in references)
    figures = []
    for strategy in strategies:
        at = {r["labels"]: r for r in rows if r["strategy"] == strategy}
        ratios = {
            f"{figure}@{budget}": at[budget]["ratio"].get(figure)
            for budget in budgets
            if budget in at
            for figure in figures_read
        }
        values = [r["value"] for r in ratios.values() if r and r["status"] == "ok"]
        whole = len(values) == len(budgets) * len(figures_read)
        mean = math.exp(sum(map(math.log, values)) / len(values)) if whole else None
        figures.append({"strategy": strategy, "ratios": ratios, "geometric_mean": mean})
    # None (a ratio missing) sorts last: every ratio is above 0.
    return sorted(figures, key=lambda f: f["geometric_mean"] or 0.0, reverse=True)


def rule_pick(primary: list[dict[str, Any]], retrained_only: bool = False) -> str:
    """The rule of BENCHMARKS.md, on ``primary_figure``'s list (highest first): the strategy
    with the highest geometric mean, provided it is above 1; otherwise uniform. With
    ``retrained_only`` (issue 39's product rule: the worker retrains its selector every run)
    the fixed selector's arms are left out."""
    if retrained_only:
        primary = [f for f in primary if not str(f["strategy"]).endswith(", fixed")]
    best = primary[0] if primary else None
    if best and (best["geometric_mean"] or 0.0) > 1:
        return str(best["strategy"])
    return REFERENCE


def print_table(result: dict[str, Any], out: TextIO = sys.stdout) -> None:
    setup = result["setup"]
    print(
        f"{setup['corpus']}, judged on the {setup['judged_on']} problems; the PRM: "
        f"{setup['device']}",
        file=out,
    )
    print(file=out)
    print(
        "| strategy | labels | ProcessBench F1 [95% CI] (sd over seeds) "
        "| step AUROC [95% CI] (sd) | uniform's labels per label, F1 [95% CI] (seeds) "
        "| same, AUROC | negatives per label |",
        file=out,
    )
    print("|---|---|---|---|---|---|---|", file=out)
    for row in result["rows"]:
        print(
            f"| {row.get('arm', row['strategy'])} | {row['labels']} | {show_estimate(row['f1'])} "
            f"| {show_estimate(row['auroc'])} | {show_ratio(row['ratio'].get('f1'))} "
            f"| {show_ratio(row['ratio'].get('auroc'))} | {row['negatives_per_label']:.2f} |",
            file=out,
        )
    print(file=out)
    if any(POOL_FIGURES.keys() & row.keys() for row in result["rows"]):
        print_pool_table(result["rows"], out)
    print_primary(
        result["primary"], setup["judged_on"] == "calibration", out, result.get("budgets_read")
    )
    print("| strategy | rounds | select + train + score, s (all seeds) | per round, s |", file=out)
    print("|---|---|---|---|", file=out)
    for name, compute in result["compute"].items():
        print(
            f"| {name} | {compute['rounds']} | {compute['seconds']:.1f} "
            f"| {compute['seconds'] / max(1, compute['rounds']):.2f} |",
            file=out,
        )


def print_pool_table(rows: list[dict[str, Any]], out: TextIO) -> None:
    """bon32's second judge: the held-out pool problems, by the simulated labeler."""
    print(
        "| strategy | labels | held-out pool F1 [95% CI] (sd) | held-out pool step AUROC "
        "[95% CI] (sd) | uniform's labels per label, pool F1 | same, pool AUROC |",
        file=out,
    )
    print("|---|---|---|---|---|---|", file=out)
    for row in rows:
        print(
            f"| {row.get('arm', row['strategy'])} | {row['labels']} "
            f"| {show_estimate(row['pool_f1'])} | {show_estimate(row['pool_auroc'])} "
            f"| {show_ratio(row['ratio'].get('pool_f1'))} "
            f"| {show_ratio(row['ratio'].get('pool_auroc'))} |",
            file=out,
        )
    print(file=out)


def print_primary(
    primary: list[dict[str, Any]], choosing: bool, out: TextIO, columns: list[str] | None = None
) -> None:
    """The primary figure's table, where the run has its budgets, and, on calibration
    problems (``choosing``), the rule's pick; a run judged on test problems confirms and
    never chooses."""
    if not any(f["geometric_mean"] is not None for f in primary):
        return
    columns = columns or [f"{f}@{b}" for b in PRIMARY_BUDGETS for f in PRIMARY_FIGURES]
    print(f"| strategy | {' | '.join(columns)} | geometric mean |", file=out)
    print("|---" * (len(columns) + 2) + "|", file=out)
    for figure in primary:
        cells = [_primary_cell(figure["ratios"].get(c)) for c in columns]
        mean = figure["geometric_mean"]
        shown = "n/a" if mean is None else f"{mean:.3f}"
        print(f"| {figure['strategy']} | {' | '.join(cells)} | {shown} |", file=out)
    if choosing:
        print(f"\nThe rule picks: {rule_pick(primary)}", file=out)
    print(file=out)


def _primary_cell(ratio: dict[str, Any] | None) -> str:
    if not ratio or ratio["status"] != "ok":
        return "n/a"
    bound = {"beyond": ">= ", "below": "<= "}.get(ratio["reach"], "")
    return f"{bound}{ratio['value']:.2f}"


COLORS = {
    "uniform": "#555555",
    "convincing_wrong": "#d62728",
    "random_wrong": "#1f77b4",
    "uncertain": "#2ca02c",
    "disagreement": "#9467bd",
    "ensemble": "#ff7f0e",
    "convincing_uncertain": "#8c564b",
    "diverse": "#17becf",
}
PANEL_WIDTH, PANEL_HEIGHT, MARGIN = 420, 300, 50


def svg_plot(rows: list[dict[str, Any]], sizes: Sequence[int]) -> str:
    """Each figure against labels (log scale), a line and a 95% band per strategy."""
    seed_row = rows[0]
    strategies = list(dict.fromkeys(r["strategy"] for r in rows[1:]))
    panels = [
        _panel(
            title,
            figure,
            {s: [seed_row, *(r for r in rows[1:] if r["strategy"] == s)] for s in strategies},
            sizes,
            index * (PANEL_WIDTH + MARGIN),
        )
        for index, (figure, title) in enumerate(FIGURES.items())
    ]
    legend = [
        f'<text x="{MARGIN + 10}" y="{PANEL_HEIGHT + 2 * MARGIN + 16 * k}" '
        f'fill="{COLORS.get(s, "#000")}" font-size="12">{s}</text>'
        for k, s in enumerate(strategies)
    ]
    width = 2 * (PANEL_WIDTH + MARGIN) + MARGIN
    height = PANEL_HEIGHT + 2 * MARGIN + 16 * len(strategies) + 10
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            'font-family="sans-serif">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            *panels,
            *legend,
            "</svg>",
            "",
        ]
    )


def _panel(
    title: str,
    figure: str,
    curves: dict[str, list[dict[str, Any]]],
    sizes: Sequence[int],
    left: int,
) -> str:
    points = [r[figure] for c in curves.values() for r in c if r[figure].get("status") == "ok"]
    if not points:
        return ""
    bottom = float(min(p["low"] for p in points))
    top = float(max(p["high"] for p in points))
    span = (top - bottom) or 1.0

    def x(labels: float) -> float:
        share = math.log(labels / sizes[0]) / math.log(sizes[-1] / sizes[0])
        return left + MARGIN + share * PANEL_WIDTH

    def y(value: float) -> float:
        return MARGIN + (1 - (value - bottom) / span) * PANEL_HEIGHT

    parts = [
        f'<text x="{left + MARGIN}" y="{MARGIN - 20}" font-size="14">{title} (test)</text>',
        f'<rect x="{left + MARGIN}" y="{MARGIN}" width="{PANEL_WIDTH}" '
        f'height="{PANEL_HEIGHT}" fill="none" stroke="#999"/>',
    ]
    for labels in sizes:
        parts.append(
            f'<text x="{x(labels):.1f}" y="{MARGIN + PANEL_HEIGHT + 15}" font-size="10" '
            f'text-anchor="middle">{labels}</text>'
        )
    for k in range(5):
        value = bottom + span * k / 4
        parts.append(
            f'<text x="{left + MARGIN - 4}" y="{y(value) + 3:.1f}" font-size="10" '
            f'text-anchor="end">{value:.3f}</text>'
        )
    for strategy, rows in curves.items():
        shown = [(r["labels"], r[figure]) for r in rows if r[figure].get("status") == "ok"]
        color = COLORS.get(strategy, "#000")
        band = [(x(n), y(e["high"])) for n, e in shown] + [
            (x(n), y(e["low"])) for n, e in reversed(shown)
        ]
        line = [(x(n), y(e["value"])) for n, e in shown]
        parts.append(f'<polygon points="{_points(band)}" fill="{color}" fill-opacity="0.08"/>')
        parts.append(
            f'<polyline points="{_points(line)}" fill="none" stroke="{color}" stroke-width="2"/>'
        )
    parts.append(
        f'<text x="{left + MARGIN + PANEL_WIDTH / 2}" y="{MARGIN + PANEL_HEIGHT + 32}" '
        'font-size="11" text-anchor="middle">labeled solutions (log scale)</text>'
    )
    return "\n".join(parts)


def svg_ratio_by_samples(rows: list[dict[str, Any]]) -> str:
    """bon32's plot: each arm's ratio (uniform's labels per label) against samples per
    problem, log-log, one panel per figure and primary budget, 95% intervals as bars."""
    samples = sorted({r["samples"] for r in rows})
    budgets = sorted({r["labels"] for r in rows if r.get("primary")})
    arms_shown = list(dict.fromkeys(r["arm"] for r in rows if "arm" in r))
    panels = [
        _ratio_panel(rows, figure, budget, samples, arms_shown, k * (PANEL_WIDTH + MARGIN))
        for k, (figure, budget) in enumerate((f, b) for f in PRIMARY_FIGURES for b in budgets)
    ]
    legend = [
        f'<text x="{MARGIN + 10 + 220 * (k % 4)}" y="{PANEL_HEIGHT + 2 * MARGIN + 16 * (k // 4)}" '
        f'fill="{_arm_color(a)}" font-size="12">{a}{" (dashed)" if a.endswith("fixed") else ""}'
        "</text>"
        for k, a in enumerate(arms_shown)
    ]
    width = len(panels) * (PANEL_WIDTH + MARGIN) + MARGIN
    height = PANEL_HEIGHT + 2 * MARGIN + 16 * (len(arms_shown) // 4 + 1) + 10
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            'font-family="sans-serif">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            *panels,
            *legend,
            "</svg>",
            "",
        ]
    )


def _arm_color(arm: str) -> str:
    return COLORS.get(arm.removesuffix(", fixed"), "#000")


def _ratio_panel(
    rows: list[dict[str, Any]],
    figure: str,
    budget: int,
    samples: list[int],
    arms_shown: list[str],
    left: int,
) -> str:
    shown = [
        r
        for r in rows
        if r["labels"] == budget and "arm" in r and r["ratio"].get(figure, {}).get("status") == "ok"
    ]
    if not shown:
        return ""
    values = [v for r in shown for v in (r["ratio"][figure]["low"], r["ratio"][figure]["high"])]
    bottom, top = math.log(min(min(values), 0.5)), math.log(max(max(values), 2.0))

    def x(n: int) -> float:
        share = (
            0.5
            if len(samples) < 2
            else math.log(n / samples[0]) / math.log(samples[-1] / samples[0])
        )
        return left + MARGIN + 20 + share * (PANEL_WIDTH - 40)

    def y(ratio: float) -> float:
        return MARGIN + (1 - (math.log(ratio) - bottom) / (top - bottom)) * PANEL_HEIGHT

    parts = [
        f'<text x="{left + MARGIN}" y="{MARGIN - 20}" font-size="14">'
        f"{FIGURES[figure]}: uniform's labels per label at {budget}</text>",
        f'<rect x="{left + MARGIN}" y="{MARGIN}" width="{PANEL_WIDTH}" '
        f'height="{PANEL_HEIGHT}" fill="none" stroke="#999"/>',
    ]
    for ratio in (0.5, 1.0, 2.0):
        parts.append(
            f'<line x1="{left + MARGIN}" x2="{left + MARGIN + PANEL_WIDTH}" y1="{y(ratio):.1f}" '
            f'y2="{y(ratio):.1f}" stroke="#bbb" '
            f'stroke-dasharray="{"none" if ratio == 1 else "3,3"}"/>'
            f'<text x="{left + MARGIN - 4}" y="{y(ratio) + 3:.1f}" font-size="10" '
            f'text-anchor="end">{ratio:g}</text>'
        )
    for n in samples:
        parts.append(
            f'<text x="{x(n):.1f}" y="{MARGIN + PANEL_HEIGHT + 15}" font-size="10" '
            f'text-anchor="middle">{n}</text>'
        )
    for k, arm in enumerate(arms_shown):
        points = sorted((r["samples"], r["ratio"][figure]) for r in shown if r["arm"] == arm)
        if not points:
            continue
        color, nudge = _arm_color(arm), (k - len(arms_shown) / 2) * 2.0
        dash = ' stroke-dasharray="5,3"' if arm.endswith("fixed") else ""
        line = [(x(n) + nudge, y(e["value"])) for n, e in points]
        parts.append(
            f'<polyline points="{_points(line)}" fill="none" stroke="{color}" '
            f'stroke-width="1.5"{dash}/>'
        )
        for n, e in points:
            parts.append(
                f'<line x1="{x(n) + nudge:.1f}" x2="{x(n) + nudge:.1f}" y1="{y(e["low"]):.1f}" '
                f'y2="{y(e["high"]):.1f}" stroke="{color}" stroke-opacity="0.6"/>'
            )
    parts.append(
        f'<text x="{left + MARGIN + PANEL_WIDTH / 2}" y="{MARGIN + PANEL_HEIGHT + 32}" '
        'font-size="11" text-anchor="middle">samples per problem (log scale)</text>'
    )
    return "\n".join(parts)


def _points(points: list[tuple[float, float]]) -> str:
    return " ".join(f"{a:.1f},{b:.1f}" for a, b in points)


def to_json(result: dict[str, Any], data: Data) -> dict[str, Any]:
    """The figures and, per run, its labeled solutions (ProcessBench ids) and snapshots."""
    return {
        **{k: v for k, v in result.items() if k != "runs"},
        "runs": [
            {
                "seed": run.seed,
                "strategy": run.strategy,
                "selector": run.selector,
                "rescorings": run.rescorings,
                "rounds": run.rounds,
                "seconds": round(run.seconds, 2),
                "labeled": [data.pool[i].id for i in run.labeled],
                "snapshots": [
                    {"labels": s.labels, "negatives": s.negatives, "threshold": s.threshold}
                    for s in run.snapshots.values()
                ],
            }
            for runs in result["runs"].values()
            for run in runs
        ],
    }


# The command line


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.active_learning", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m or tiny")
    parser.add_argument(
        "--mode",
        choices=("head", "full", "lora"),
        default="head",
        help="head: the CPU default; full: fine-tune the whole PRM each round (a GPU's)",
    )
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument(
        "--corpus",
        choices=("processbench", PRMBENCH, BON32),
        default="processbench",
        help="prmbench: the paper's regime, up to 9 labeled solutions per problem; bon32: "
        "32 sampled solutions per problem, labeled by the 7B PRM's simulated labeler",
    )
    parser.add_argument(
        "--half",
        choices=HALVES,
        default=HALVES[1],
        help="bon32: the half of its problems to run on (calibration: to choose on)",
    )
    parser.add_argument(
        "--samples",
        default=",".join(map(str, BON32_SAMPLES)),
        help="bon32: samples per problem in the pool, one run each (the first N of the 32)",
    )
    parser.add_argument(
        "--problems",
        type=int,
        default=BON32_PROBLEMS,
        help=f"bon32: pool problems (and {BON32_HELD_OUT_PROBLEMS} held out); 0: the whole "
        "half (a GPU's job)",
    )
    parser.add_argument(
        "--selectors",
        help=f"{', '.join(SELECTORS)} (default: both on bon32, retrain elsewhere)",
    )
    parser.add_argument(
        "--subsets", default=",".join(DEFAULT_SUBSETS), help=", ".join(PROCESSBENCH_SUBSETS)
    )
    parser.add_argument(
        "--per-subset",
        type=int,
        help="a fixed sample of each subset (PRMBench: of its trajectories)",
    )
    parser.add_argument(
        "--judge",
        choices=("test", "calibration"),
        default="test",
        help="calibration: judge on the calibration problems, to choose by; never reads a "
        "test problem",
    )
    parser.add_argument(
        "--head",
        choices=sorted(HEADS),
        default=LEARNER_HEAD,
        help="a head of bench/prm_quality.py (default: five linear members on every reading)",
    )
    parser.add_argument(
        "--strategies",
        help=f"default: every one; bon32: {','.join(BON32_STRATEGIES)} (BENCHMARKS.md, issue 39)",
    )
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0 .. N-1")
    parser.add_argument(
        "--workers",
        type=int,
        help="seeds run side by side in this many processes (default: in head mode one per "
        "CPU core, at most one per seed; otherwise 1, in this process)",
    )
    parser.add_argument(
        "--seed-size",
        type=int,
        help="the uniform seed set (default 50; bon32: one solution of each of 16 problems)",
    )
    parser.add_argument("--budgets", help="cumulative labels (default 100,200,400; bon32: 32,48)")
    parser.add_argument(
        "--batch", type=int, help="labels per round, 0: to the budget (default 50; bon32: 0)"
    )
    parser.add_argument(
        "--per-problem", type=int, help="K per problem per round, 0: global (bon32: 2)"
    )
    parser.add_argument("--wrong-share", type=float, default=SelectionPlan.wrong_share)
    parser.add_argument("--cache-dir", type=Path, help="default: <checkpoint_dir>/feature-cache")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument(
        "--resume",
        type=Path,
        help="keep each finished seed in this folder, and take the seeds a stopped run with "
        "the same options left there",
    )
    options = parser.parse_args(argv)
    bon32 = options.corpus == BON32
    defaults = (
        (BON32_SEED_SIZE, BON32_BUDGETS, 0, BON32_PER_PROBLEM)
        if bon32
        else (50, "100,200,400", 50, 0)
    )
    for name, default in zip(
        ("seed_size", "budgets", "batch", "per_problem"), defaults, strict=True
    ):
        if getattr(options, name) is None:
            setattr(options, name, default)
    options.selectors = (
        options.selectors or ",".join(SELECTORS if bon32 else SELECTORS[:1])
    ).split(",")
    if not options.selectors or not set(options.selectors) <= set(SELECTORS):
        parser.error(f"selectors from {', '.join(SELECTORS)}")
    options.samples = [int(n) for n in str(options.samples).split(",")] if bon32 else [0]
    if any(n < 1 or n > SAMPLES for n in options.samples) and bon32:
        parser.error(f"--samples: between 1 and {SAMPLES}")
    strategies = (options.strategies or ",".join(BON32_STRATEGIES if bon32 else STRATEGIES)).split(
        ","
    )
    if REFERENCE not in strategies or not set(strategies) <= set(STRATEGIES):
        parser.error(f"strategies from {', '.join(STRATEGIES)}, {REFERENCE} among them")
    options.strategies = [REFERENCE, *(s for s in strategies if s != REFERENCE)]
    budgets = tuple(sorted(int(b) for b in options.budgets.split(",")))
    if budgets[0] <= options.seed_size or options.seed_size < 1:
        parser.error("the budgets must exceed the seed set, which must not be empty")
    options.schedule = Schedule(options.seed_size, budgets, options.batch or None)
    if options.workers is None:
        cores = os.cpu_count() or 1
        options.workers = min(cores, options.seeds) if options.mode == "head" else 1
    if options.workers < 1:
        parser.error("--workers must be at least 1")
    options.cache_dir = options.cache_dir or get_settings().checkpoint_dir / "feature-cache"
    options.base_model = resolve_base_model(options.model, get_settings().model_dir)
    return options


def run_once(options: argparse.Namespace, progress: Progress) -> tuple[dict[str, Any], Data]:
    """Every arm from every seed on one corpus (for bon32, at one ``samples`` per problem):
    the rows, the primary figure, the compute."""
    data = load(options)
    if options.schedule.budgets[-1] > len(data.pool):
        raise SystemExit(f"the largest budget exceeds the pool of {len(data.pool)} solutions")
    progress.line(
        f"{options.corpus}: pool {len(data.pool)}, calibration {len(data.split.calibration)}, "
        f"test {len(data.split.test)}, held-out pool {len(data.held_out)} solutions"
    )
    result = compare(data, options, progress)
    runs: dict[str, list[Run]] = result["runs"]
    rows = summarize(runs, options.schedule, result.pop("whole_pool"))
    bon32 = options.corpus == BON32
    budgets = BON32_PRIMARY_BUDGETS if bon32 else PRIMARY_BUDGETS
    read = BON32_CHOICE_FIGURES if bon32 else PRIMARY_FIGURES
    result["primary"] = primary_figure(rows, budgets, read)
    result["budgets_read"] = [f"{f}@{b}" for b in budgets for f in read]
    primary = not bon32 or options.samples == BON32_PRIMARY_SAMPLES
    result["rows"] = [annotated(row, budgets if primary else (), options) for row in rows]
    result["compute"] = {
        s: {"seconds": sum(r.seconds for r in rs), "rounds": sum(r.rounds for r in rs)}
        for s, rs in runs.items()
    }
    return result, data


def annotated(
    row: dict[str, Any], primary_budgets: Sequence[int], options: argparse.Namespace
) -> dict[str, Any]:
    """A summary row with its strategy and selector apart (bon32: and its samples per
    problem), and ``primary: true`` at the pre-registered primary budgets."""
    arm = row["strategy"]
    strategy, fixed = arm.removesuffix(", fixed"), arm.endswith(", fixed")
    extra: dict[str, Any] = {}
    if options.corpus == BON32:
        extra["samples"] = options.samples
    if arm not in (SEED_ROW, WHOLE_POOL_ROW):
        extra["selector"] = "fixed" if fixed else ("none" if arm == REFERENCE else "retrain")
        extra["arm"] = arm
    if arm not in (SEED_ROW, WHOLE_POOL_ROW) and row["labels"] in primary_budgets:
        extra["primary"] = True
    return {**row, "strategy": strategy, **extra}


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    progress = Progress()
    if options.corpus != BON32:
        result, data = run_once(options, progress)
        result["wall_seconds"] = round(time.perf_counter() - progress.started, 1)
        progress.line(f"done in {result['wall_seconds']} s")
        print_table(result)
        options.plot.parent.mkdir(parents=True, exist_ok=True)
        options.plot.write_text(svg_plot(result["rows"], options.schedule.sizes))
        if options.json:
            options.json.write_text(json.dumps(to_json(result, data), indent=2) + "\n")
        return 0
    results = []
    for samples in options.samples:
        at = argparse.Namespace(**{**vars(options), "samples": samples})
        if options.resume:
            at.resume = options.resume / f"samples-{samples}"
        result, data = run_once(at, progress)
        print(f"## {samples} samples per problem\n")
        print_table(result)
        results.append({"samples": samples, **to_json(result, data)})
    choice = strategy_for_pool([max(options.samples)] * (options.problems or 1))
    combined = {
        "corpus": BON32,
        "half": options.half,
        "judged_on": options.judge,
        "default_strategy": choice.strategy,
        "default_rule": choice.reason,
        "picks": {r["samples"]: rule_pick(r["primary"], retrained_only=True) for r in results},
        "picks_any_selector": {r["samples"]: rule_pick(r["primary"]) for r in results},
        "rows": [row for r in results for row in r["rows"]],
        "by_samples": results,
        "wall_seconds": round(time.perf_counter() - progress.started, 1),
    }
    progress.line(f"done in {combined['wall_seconds']} s")
    options.plot.parent.mkdir(parents=True, exist_ok=True)
    options.plot.write_text(svg_ratio_by_samples(combined["rows"]))
    if options.json:
        options.json.write_text(json.dumps(combined, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
