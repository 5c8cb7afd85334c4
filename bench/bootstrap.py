"""The step AUROC's bootstrap: milliseconds per resample, as ``StepSet.auroc_statistic``
computes it (the steps ranked once, a draw weighing them) against its definition (the drawn
problems' steps laid out again, ranked anew by ``auroc``).

    .venv/bin/python -m bench.bootstrap [--problems 1428] [--draws 1000]

Synthetic steps of ProcessBench's test half's shape (1,428 problems with labeled steps,
2-13 steps each, scores rounded to 4 places so that some tie, a fifth of the steps -1);
the same draws for both, and the figures checked equal.
"""

import argparse
import sys
import time

import numpy as np

from app.estimates import StepSet, auroc, resample, split_units


def synthetic_steps(problems: int, seed: int = 0) -> StepSet:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 14, problems)
    scores = [np.round(rng.random(n), 4) for n in sizes]
    ratings = [rng.choice([-1, 0, 1], n, p=[0.2, 0.2, 0.6]) for n in sizes]
    return StepSet(scores, ratings)


def by_definition(steps: StepSet, drawn: np.ndarray) -> float | None:
    scores = np.concatenate([steps.negative_probability[p] for p in drawn])
    ratings = np.concatenate([steps.ratings[p] for p in drawn])
    return auroc(scores, ratings == -1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bootstrap", description=__doc__)
    parser.add_argument("--problems", type=int, default=1428)
    parser.add_argument("--draws", type=int, default=1000)
    options = parser.parse_args(argv)
    steps = synthetic_steps(options.problems)
    draws = resample(split_units(np.arange(options.problems), None), options.draws, 0)
    statistic = steps.auroc_statistic()
    timings, figures = {}, {}
    for name, compute in (
        ("auroc_statistic", statistic),
        ("by definition", lambda drawn: by_definition(steps, drawn)),
    ):
        started = time.perf_counter()
        figures[name] = [compute(drawn) for drawn in draws]
        timings[name] = (time.perf_counter() - started) / len(draws) * 1e3
    if figures["auroc_statistic"] != figures["by definition"]:
        raise AssertionError("the two ways disagree")
    total = sum(len(r) for r in steps.ratings)
    print(f"{options.problems} problems, {total} steps, {options.draws} draws (figures equal)")
    for name, milliseconds in timings.items():
        print(f"{name:>16}: {milliseconds:.3f} ms per draw")
    return 0


if __name__ == "__main__":
    sys.exit(main())
