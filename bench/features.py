"""Fill the feature cache for the benches' corpora ahead of time, with progress.

    .venv/bin/python -m bench.features                        # every corpus, in this order
    .venv/bin/python -m bench.features --corpora gsm8k,math   # what the defaults read
    .venv/bin/python -m bench.features --corpora math --solutions 64 --cache-dir /tmp/fc
                                                  # tokens/s on a quick sample, empty cache

The benches (bench/prm_quality.py, bench/active_learning.py) fill what they lack themselves;
this computes it once, in the background, so that they start warm. Corpora: the four
ProcessBench subsets, PRMBench (bench/prmbench.py, as bench/active_learning.py reads it:
without the trajectories whose problem is a ProcessBench test problem) and bon32's two
halves (bench/bon32.py: the default pool at 32 samples per problem and the held-out
problems, as ``--corpus bon32 --half ...`` reads them), every whole
solution: the labeled paths that stop at an error are step prefixes of them, read from the
cache for free. The
model is the worker's CPU default (SmolLM2-135M, ``head`` mode, every reading), or
``--base-model``'s backbone in the same mode (a cache file of its own).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from app.core.config import get_settings
from bench import SHARED_DATA
from bench.active_learning_data import BON32_HELD_OUT_PROBLEMS, BON32_PROBLEMS, prmbench_corpus
from bench.bon32 import bon32_items
from bench.prmbench import SUBSET as PRMBENCH
from worker.eval_sets import PROCESSBENCH_SUBSETS, ProcessBenchItem, load_processbench
from worker.features import cache_for
from worker.pretrained import resolve_base_model
from worker.score import Throughput, fill_cache
from worker.train import setup
from worker.training_args import training_args_for

BON32_CORPORA = ("bon32-calibration", "bon32-confirmation")
"""The bon32 halves' default pools and held-out problems, as bench/active_learning.py
``--corpus bon32`` reads them (32 samples per problem)."""
CORPORA = (*PROCESSBENCH_SUBSETS[:2], *BON32_CORPORA, PRMBENCH, *PROCESSBENCH_SUBSETS[2:])


def corpus(name: str, data: Path, trajectories: int | None) -> list[ProcessBenchItem]:
    if name == PRMBENCH:
        return prmbench_corpus(data, trajectories)[0]
    if name in BON32_CORPORA:
        half = name.split("-")[1]
        return bon32_items(data, half, 32, BON32_PROBLEMS, BON32_HELD_OUT_PROBLEMS)
    return load_processbench(data, [name])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.features", description=__doc__)
    parser.add_argument("--corpora", default=",".join(CORPORA), help=", ".join(CORPORA))
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--cache-dir", type=Path, help="default: <checkpoint_dir>/feature-cache")
    parser.add_argument(
        "--prmbench-trajectories",
        type=int,
        help="PRMBench as bench/active_learning.py --corpus prmbench --per-subset N reads it",
    )
    parser.add_argument(
        "--base-model",
        default="smollm2-135m",
        help="a prepared model's name (python -m worker prepare --list) or a directory",
    )
    parser.add_argument(
        "--solutions", type=int, help="only the first N of each corpus: a quick speed check"
    )
    parser.add_argument(
        "--score-batch-size", type=int, help="sequences per forward pass (default: the CPU's, 1)"
    )
    options = parser.parse_args(argv)
    if any(n is not None and n < 1 for n in (options.solutions, options.score_batch_size)):
        parser.error("--solutions and --score-batch-size must be >= 1")
    settings = get_settings()
    base = resolve_base_model(options.base_model, settings.model_dir)
    args = training_args_for(
        base, mode="head", device="cpu", score_batch_size=options.score_batch_size
    )
    model, tokenizer, _ = setup(args)
    cache = cache_for(model, args, options.cache_dir or settings.checkpoint_dir / "feature-cache")
    assert cache is not None  # head mode
    started = time.perf_counter()
    for name in options.corpora.split(","):
        chosen = corpus(name, options.data, options.prmbench_trajectories)[: options.solutions]
        items = [(i.problem, i.steps) for i in chosen]

        def report(
            done: int, throughput: Throughput, name: str = name, total: int = len(items)
        ) -> None:
            print(
                f"[{time.perf_counter() - started:7.1f} s] {name}: {done} of {total} solutions, "
                f"{throughput.tokens_per_second:.0f} tokens/s",
                file=sys.stderr,
                flush=True,
            )

        cpu_started = time.process_time()
        done = fill_cache(model, tokenizer, items, args, cache, report)
        # CPU time says what the features cost on a machine others share; wall time does not.
        cpu = time.process_time() - cpu_started
        print(
            f"{name}: {len(items)} solutions, {done.sequences} sequences computed "
            f"({done.tokens} tokens) in {done.seconds:.0f} s, {cpu:.1f} CPU s "
            f"({1000 * cpu / max(done.tokens, 1):.2f} CPU s per 1,000 tokens)",
            flush=True,
        )
    print(f"cache: {cache.path}, {len(cache)} sequences", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
