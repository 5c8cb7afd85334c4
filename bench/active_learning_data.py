"""bench/active_learning.py's corpus: the labels a simulated labeler reveals, as PRM800K
records turned into the worker's training examples, and the pool, calibration and test
problems of ProcessBench, PRMBench or bon32 split by problem.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from app.content_keys import normalized_problem
from app.models import FinishReason
from app.prm800k import completion_dict, dumps, parse_line, question_dict, record_dict, step_dict
from bench.bon32 import BON32, Bon32Split, bon32_split, grades_file, load_bon32
from bench.prm_quality_data import Split, split
from bench.prmbench import SUBSET as PRMBENCH
from bench.prmbench import prmbench_without, problem_group
from worker.data import examples_from_record
from worker.eval_sets import ProcessBenchItem, fixed_sample, load_processbench
from worker.split import split_key
from worker.train import Example

SPLIT_SEED = 0
TEST_SHARE = 0.5
"""bench/prm_quality.py's defaults: the same split, so its cached features cover it."""
LABELER = "00000000-0000-4000-8000-000000000000"
REVEALED_AT = datetime(2024, 1, 1)
"""Who and when, in the simulated labels' records."""
DEFAULT_SUBSETS = ("gsm8k", "math")
"""The subsets whose SmolLM2 features bench/prm_quality.py caches (see the docstring)."""
BON32_PROBLEMS = 64
BON32_HELD_OUT_PROBLEMS = 16
"""The default bon32 configuration's pool and held-out problems per half (half GSM8K,
half MATH-500): sized so that it runs from a cold feature cache in under an hour on 2 CPU
cores (BENCHMARKS.md, issue 39); ``--problems 0`` takes the whole half (a GPU's job)."""


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
