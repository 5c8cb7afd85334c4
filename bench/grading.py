"""How fast the grader decides final answers, as the worker grades a pool: the bon32 pool's
sampled solutions (32 a problem, one problem's after another) against their ground truths.

    .venv/bin/python -m bench.grading [--dataset math500] [--problems 100] [--repeats 3]

Prints the answers graded per second, per repeat. Each repeat starts a fresh pool of grading
processes (not timed), so that nothing one repeat parsed is kept for the next: a worker's
pool meets a new pool of solutions the same way. MATH-500's ground truths come from
math500_test.jsonl (bench/bon32.py says why), GSM8K's from the file.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

from app.grading import equivalences, shutdown_pool
from bench import SHARED_DATA
from bench.bon32 import answer_pairs, ground_truths, read_records

SAMPLES = 32


def graded_per_second(pairs: list[tuple[str, str]]) -> float:
    """One run of ``equivalences`` over ``pairs`` on a fresh pool, started before the clock."""
    shutdown_pool()
    equivalences([("x", "1")])  # starts the pool; "x" against 1 goes to math-verify
    started = time.perf_counter()
    equivalences(pairs)
    return len(pairs) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.grading", description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--dataset", choices=("math500", "gsm8k"), default="math500")
    parser.add_argument("--problems", type=int, default=100, help="the first N problems")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args(argv)
    records = [r for r in read_records(options.data) if r["dataset"] == options.dataset]
    records = records[: options.problems * SAMPLES]
    pairs = answer_pairs(records, ground_truths(options.data))
    print(f"{options.dataset}: {len(pairs)} answers of {len(pairs) // SAMPLES} problems")
    rates = []
    for repeat in range(1, options.repeats + 1):
        rates.append(graded_per_second(pairs))
        print(f"repeat {repeat}: {rates[-1]:.1f} answers/s", flush=True)
    print(f"median {statistics.median(rates):.1f} answers/s over {options.repeats} repeats")
    shutdown_pool()
    return 0


if __name__ == "__main__":
    sys.exit(main())
