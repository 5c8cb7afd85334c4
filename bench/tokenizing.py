"""Tokenizing solutions for the PRM: one tokenizer call a solution (``encode`` in a loop, as
the worker did before) against one call for all of them (``encode_many``), in solutions/s
and tokens/s, with the layouts checked equal.

    .venv/bin/python -m bench.tokenizing [--model models/smollm2-135m] [--repeats 3]

The solutions are ProcessBench's 3,400 (../shared/data, or ``--data``; ``--solutions`` takes
the first N), tokenized by the prepared model's tokenizer (``python -m worker prepare
smollm2-135m``; ``tiny`` for the tiny model's byte tokenizer) with the step token added, at
the worker's ``max_length``. A fast tokenizer spreads a call's texts over its threads (Rust;
``TOKENIZERS_PARALLELISM=false`` turns that off), so what one call for all buys depends on
the cores; on a GPU the model's share of scoring shrinks and this one stays.
"""

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from transformers import AutoTokenizer

from bench import SHARED_DATA
from worker.eval_sets import load_processbench
from worker.layout import Encoded, build_tiny_tokenizer, encode, encode_many, prepare_tokenizer
from worker.training_args import TINY, TrainingArgs

Solutions = list[tuple[str, list[str], list[int | None] | None]]


def timed(run: Callable[[], list[Encoded]], repeats: int) -> tuple[float, list[Encoded]]:
    """The best of ``repeats`` runs' seconds, and what the last one made."""
    best, made = float("inf"), []
    for _ in range(repeats):
        started = time.perf_counter()
        made = run()
        best = min(best, time.perf_counter() - started)
    return best, made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tokenizing", description=__doc__)
    parser.add_argument("--model", default="models/smollm2-135m")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--solutions", type=int, help="the first N solutions only")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args(argv)
    if options.model == TINY:
        tokenizer = build_tiny_tokenizer()
    elif Path(options.model).is_dir():
        loaded = AutoTokenizer.from_pretrained(options.model, local_files_only=True)
        tokenizer = prepare_tokenizer(loaded)
    else:
        parser.error(f"{options.model} is not a prepared model: python -m worker prepare")
    items = load_processbench(options.data)[: options.solutions]
    solutions: Solutions = [(i.problem, i.steps, None) for i in items]
    if not solutions:
        parser.error(f"no ProcessBench files in {options.data}")
    max_length = TrainingArgs().max_length
    each, alone = timed(
        lambda: [encode(tokenizer, p, s, labels, max_length) for p, s, labels in solutions],
        options.repeats,
    )
    together, batched = timed(
        lambda: encode_many(tokenizer, solutions, max_length), options.repeats
    )
    if alone != batched:
        raise AssertionError("encode_many laid out something else than encode")
    tokens = sum(len(e.input_ids) for e in batched)
    print(
        f"{len(solutions):,} solutions, {tokens:,} tokens, max_length {max_length}; "
        f"{os.cpu_count()} cores, TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM')}"
    )
    for name, seconds in (("a call a solution", each), ("one call for all", together)):
        print(
            f"{name:>18}: {seconds:.2f} s, {len(solutions) / seconds:,.0f} solutions/s, "
            f"{tokens / seconds:,.0f} tokens/s"
        )
    print(f"{each / together:.2f}x (best of {options.repeats} runs each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
