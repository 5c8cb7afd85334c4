"""How long the head of ``head`` mode takes to train, with the worker's settings, on
features of the real width: the part of a worker run (and of every active-learning round)
that never touches the backbone.

    .venv/bin/python -m bench.head_fit                          # the default head, 2,297 steps
    .venv/bin/python -m bench.head_fit --steps 8000 --hidden 0  # five linear members

The features are random (a head's training time does not depend on their values), as wide
as the default readings of SmolLM2-135M (five readings of 576); 2,297 labeled steps is what
ProcessBench's gsm8k and math training problems hold (BENCHMARKS.md, "PRM quality"). The
head trains as ``worker.train.fit`` trains it: the learning rate, epochs, batch size and
L2 prior of ``MODE_TRAINING["head"]``. Each configuration is timed ``--repeats`` times
after one untimed run; the fastest is printed with the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from worker.head import StepHead, fit_head
from worker.model import HEAD_READINGS
from worker.train import head_training, linear_schedule
from worker.training_args import MODE_TRAINING, training_args_for

SMOLLM2_WIDTH = 576
DEFAULTS = MODE_TRAINING["head"]


def time_fit(steps: int, width: int, hidden: int, members: int, seed: int) -> float:
    """Seconds to train one head of ``members`` members on ``steps`` random labeled steps."""
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(steps, width, generator=generator)
    classes = torch.randint(0, 3, (steps,), generator=generator)
    head = StepHead(width, hidden=hidden, members=members, standardized=True)
    started = time.perf_counter()
    training = head_training(training_args_for("smollm2-135m", mode="head", seed=seed))
    fit_head(head, features, classes, training, linear_schedule)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.head_fit", description=__doc__)
    parser.add_argument("--steps", type=int, default=2297, help="labeled steps")
    parser.add_argument("--width", type=int, default=SMOLLM2_WIDTH * len(HEAD_READINGS))
    parser.add_argument(
        "--hidden", default=f"{DEFAULTS['head_hidden']},0", help="hidden units (0: linear)"
    )
    parser.add_argument("--members", type=int, default=DEFAULTS["head_members"])
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args(argv)
    if min(options.steps, options.width, options.members, options.repeats) < 1:
        parser.error("--steps, --width, --members and --repeats must be >= 1")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| members | hidden | steps | width | fastest s | median s |")
    print("|---|---|---|---|---|---|")
    for hidden in (int(h) for h in options.hidden.split(",")):
        time_fit(options.steps, options.width, hidden, options.members, seed=0)  # warm-up
        times = [
            time_fit(options.steps, options.width, hidden, options.members, seed=1 + repeat)
            for repeat in range(options.repeats)
        ]
        print(
            f"| {options.members} | {hidden or 'linear'} | {options.steps:,} | {options.width:,} "
            f"| {min(times):.1f} | {statistics.median(times):.1f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
