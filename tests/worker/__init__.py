"""Tests of the PRM worker, and the arithmetic world that the training tests learn.

Torch is imported inside the helpers, not here: this package's torch-free tests (select,
evaluate) import this module too and should stay light.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from worker.model import PRM
    from worker.train import Example, FitStats
    from worker.training_args import TrainingArgs

PROBLEM = "Check each sum."
FILLER = "Let us go on."
"""A neutral step: it neither helps nor hurts (label 0)."""


def equation(a: int, b: int, c: int) -> str:
    return f"{a}+{b}={c}"


def arithmetic_examples(count: int, seed: int) -> list[Example]:
    """Solutions whose steps are single-digit sums, labeled by a rule the PRM can learn.

    A true sum is +1, a false one -1 (and, as in PRM800K, the solution ends there), the
    filler step 0. Two solutions per problem, so the split by problem has something to do.
    """
    from worker.train import Example

    rng = random.Random(seed)
    examples = []
    for index in range(count):
        steps: list[str] = []
        labels: list[int] = []
        length = rng.randint(2, 6)
        while len(steps) < length and -1 not in labels:
            roll = rng.random()
            a = rng.randint(0, 9)
            b = rng.randint(0, 9 - a)  # sums stay one digit: every step has one shape
            if roll < 0.15:
                steps.append(FILLER)
                labels.append(0)
            elif roll < 0.40:
                wrong = rng.choice([c for c in range(10) if c != a + b])
                steps.append(equation(a, b, wrong))
                labels.append(-1)
            else:
                steps.append(equation(a, b, a + b))
                labels.append(1)
        examples.append(Example(index // 2, PROBLEM, steps, labels))
    return examples


@contextmanager
def deterministic_torch(seed: int = 0) -> Iterator[None]:
    """Seeded, deterministic kernels, one thread (tiny matrices run fastest that way)."""
    import torch

    threads = torch.get_num_threads()
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(was_deterministic)


def tiny_args(**changes: Any) -> TrainingArgs:
    """The tiny model's training arguments, on the CPU, for the arithmetic world."""
    from worker.training_args import training_args_for

    settings: dict[str, Any] = {
        "device": "cpu",
        # Random batches: in this world short solutions are the ones that end in an error,
        # so length-grouped batches are nearly all-negative or all-positive (seeds 0-12
        # all pass with this; length pools of 4 pass with less margin).
        "length_pool_batches": 1,
        "seed": 0,
        # fp32 even on a CPU with AMX, where the default is bf16: tests compare scores
        # across batchings to 1e-6, which bf16's rounding does not keep.
        "bf16": False,
    }
    return training_args_for("tiny", **(settings | changes))


@dataclass(frozen=True)
class Trained:
    model: PRM
    tokenizer: PreTrainedTokenizerBase
    args: TrainingArgs
    held_out: list[Example]
    stats: FitStats
    metrics: dict[str, Any]


HELD_OUT = 0.25
"""Share of the arithmetic world's problems the trained PRM never sees."""

ARITHMETIC = pytest.mark.xdist_group("arithmetic_prm")
"""For the tests that use ``trained_arithmetic_prm``: one test process trains it once."""


@functools.cache
def trained_arithmetic_prm() -> Trained:
    """The tiny PRM trained once per test session on the arithmetic world (seconds)."""
    from worker.assess import EvalSets, assess
    from worker.train import fit, setup, split_by_problem

    args = tiny_args()
    train, held_out = split_by_problem(arithmetic_examples(800, seed=0), HELD_OUT, args.seed)
    with deterministic_torch(args.seed):
        model, tokenizer, _device = setup(args)
        stats = fit(model, tokenizer, train, args)
        metrics = assess(model, tokenizer, args, EvalSets(held_out=held_out)).figures
    return Trained(model, tokenizer, args, held_out, stats, metrics)
