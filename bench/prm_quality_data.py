"""The data of bench/prm_quality.py: ProcessBench split into training, calibration and test
problems by a hash of each problem, and PRM800K phase 1's human step ratings to train on and
judge by, every ProcessBench problem left out of them."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.content_keys import normalized_problem
from bench.prmbench import prmbench_without
from worker import phase1
from worker.eval_sets import (
    ProcessBenchItem,
    fixed_sample,
    load_processbench,
    split_by_problem_hash,
)
from worker.train import Example

PHASE1_TEST = "prm800k-phase1-test"
"""The step AUROC set of PRM800K phase 1's test problems (human ratings), ProcessBench's
problems left out."""


CALIBRATION_SHARE = 0.2
"""Share of the training problems kept for choosing the threshold (not trained on)."""


@dataclass(frozen=True)
class Split:
    train: list[ProcessBenchItem]
    calibration: list[ProcessBenchItem]
    test: list[ProcessBenchItem]


def split(
    items: list[ProcessBenchItem],
    test_share: float,
    seed: int,
    problem: Callable[[ProcessBenchItem], str] = lambda item: item.problem,
) -> Split:
    """Test, calibration and training problems, by a hash of each item's ``problem``."""
    test, rest = split_by_problem_hash(items, test_share, seed, problem)
    calibration, train = split_by_problem_hash(rest, CALIBRATION_SHARE, seed + 1, problem)
    return Split(train, calibration, test)


def restrict(data: Split, judged: Sequence[str], trained: Sequence[str]) -> Split:
    """The split with training items from the ``trained`` subsets only, calibration and test
    items from the ``judged`` ones. A problem's side never depends on the subsets chosen
    (its hash decides), so a test problem stays one whatever is trained on."""
    return Split(
        [i for i in data.train if i.subset in trained],
        [i for i in data.calibration if i.subset in judged],
        [i for i in data.test if i.subset in judged],
    )


def examples(items: Sequence[ProcessBenchItem]) -> list[Example]:
    """The items as training examples; a problem's id is stable across runs."""
    ids = {problem: i for i, problem in enumerate(sorted({i.problem for i in items}))}
    return [Example(ids[i.problem], i.problem, i.steps, i.labels) for i in items]


Scored = ProcessBenchItem | Example
"""What a trained model scores: anything with a problem and its steps."""


Probabilities = Callable[[Sequence[Scored]], list[np.ndarray]]
"""A trained model, as what the figures need: per item, (steps, 3) class probabilities."""


def split_from_options(options: argparse.Namespace) -> Split | None:
    """The split ``--subsets``, ``--train-subsets``, ``--per-subset``, ``--test-share`` and
    ``--seed`` ask for, from ``--data``; None when it holds no ProcessBench file."""
    judged = options.subsets.split(",")
    trained = (options.train_subsets or options.subsets).split(",")
    items = fixed_sample(
        load_processbench(options.data, list(dict.fromkeys([*judged, *trained]))),
        options.per_subset,
        options.seed,
    )
    if not items:
        return None
    return restrict(split(items, options.test_share, options.seed), judged, trained)


def with_prmbench(data: Split, options: argparse.Namespace) -> Split:
    """The split with PRMBench's solutions added to training, every trajectory whose problem
    is a ProcessBench calibration or test problem (of any subset) left out (a fixed sample of
    ``--prmbench-trajectories`` of the rest)."""
    everything = split(load_processbench(options.data), options.test_share, options.seed)
    judged = {normalized_problem(i.problem) for i in everything.calibration + everything.test}
    extra, dropped = prmbench_without(options.data, judged, options.prmbench_trajectories)
    print(
        f"PRMBench: {len(extra)} solutions added to training; {dropped} trajectories left "
        "out (their problem is a ProcessBench calibration or test problem)",
        flush=True,
    )
    return Split([*data.train, *extra], data.calibration, data.test)


def _phase1_file(options: argparse.Namespace) -> Path:
    return Path(options.data) / phase1.FILE_NAME


def _processbench_problems(options: argparse.Namespace, sides: str) -> set[str]:
    """The normalized ProcessBench problems (every subset) of the split's ``sides``:
    ``judged`` (calibration and test) or ``all``."""
    everything = split(load_processbench(options.data), options.test_share, options.seed)
    items = everything.calibration + everything.test
    if sides == "all":
        items += everything.train
    return {normalized_problem(i.problem) for i in items}


def phase1_training(options: argparse.Namespace) -> list[Example]:
    """PRM800K phase 1's training step labels (a fixed sample of ``--phase1-problems``),
    every problem that is a ProcessBench calibration or test problem left out."""
    judged = _processbench_problems(options, "judged")
    everything = phase1.training_examples(_phase1_file(options))
    kept = [e for e in everything if normalized_problem(e.problem) not in judged]
    chosen = phase1.problem_sample(kept, options.phase1_problems, options.seed)
    print(
        f"PRM800K phase 1: {len(chosen)} step labels of "
        f"{len({e.problem for e in chosen})} training problems added to training; "
        f"{len(everything) - len(kept)} left out (a ProcessBench calibration or test problem)",
        flush=True,
    )
    return chosen


def phase1_judged(options: argparse.Namespace) -> list[Example]:
    """PRM800K phase 1's test step labels to judge step AUROC on (a fixed sample of
    ``--phase1-test-problems``), every ProcessBench problem left out (28 are in its math
    subset: a model may have trained or calibrated on them)."""
    path = _phase1_file(options)
    if options.phase1_test_problems == 0 or options.judge != "test" or not path.exists():
        return []
    judged = phase1.judging_examples(path, _processbench_problems(options, "all"))
    chosen = phase1.problem_sample(judged, options.phase1_test_problems, options.seed)
    print(
        f"PRM800K phase 1 test: {len(chosen)} step labels of "
        f"{len({e.problem for e in chosen})} problems judged (ProcessBench's left out)",
        flush=True,
    )
    return chosen
