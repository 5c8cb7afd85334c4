"""What a prefix's key/value cache, shared among PRM800K phase 1's candidates, saves.

    .venv/bin/python -m bench.shared_prefix --problems 3

Fills two empty feature caches with the step features of ``--problems`` phase-1 training
problems (``phase1.problem_sample``, seed 0: the first of the bench's sample), the worker's
CPU default backbone in ``head`` mode (or ``--base-model``'s):
- ``unshared``: one solution per ``fill_cache`` chunk, so no two sequences meet and each
  rated candidate runs its whole prefix again (the code before the shared cache; a chosen
  candidate is still read from a longer sequence's cached rows);
- ``shared``: 64 solutions per chunk, as the benches fill, so the candidates after one
  prefix run it once and then their own tokens on its key/value cache.
Prints the CPU seconds of each (``time.process_time``: the machine is shared, wall time
is not its own), the tokens the model ran and the largest difference between the two
caches' features (both rounded to float16, as cached).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from app.core.config import get_settings
from bench import SHARED_DATA
from worker import phase1
from worker.features import cache_for
from worker.pretrained import resolve_base_model
from worker.score import fill_cache, step_features
from worker.train import setup
from worker.training_args import training_args_for


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shared_prefix", description=__doc__)
    parser.add_argument("--problems", type=int, default=3)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--base-model", default="smollm2-135m")
    options = parser.parse_args(argv)
    everything = phase1.training_examples(options.data / phase1.FILE_NAME)
    chosen = phase1.problem_sample(everything, options.problems, seed=0)
    items = [(e.problem, e.steps) for e in chosen]
    directory = resolve_base_model(options.base_model, get_settings().model_dir)
    args = training_args_for(directory, mode="head", device="cpu")
    model, tokenizer, _ = setup(args)
    print(f"{len(items)} rated candidates of {options.problems} phase-1 problems", flush=True)
    features = {}
    with tempfile.TemporaryDirectory(prefix="shared-prefix-") as root:
        for name, chunk in (("shared", 64), ("unshared", 1)):
            cache = cache_for(model, args, Path(root) / name)
            assert cache is not None  # head mode
            started = time.process_time()
            done = fill_cache(model, tokenizer, items, args, cache, chunk=chunk)
            seconds = time.process_time() - started
            features[name] = step_features(model, tokenizer, items, args, cache)[0]
            print(
                f"{name}: {done.sequences} sequences computed, {done.tokens} tokens run, "
                f"{seconds:.1f} CPU s, {1000 * seconds / done.tokens:.2f} CPU s per 1,000 "
                "tokens run",
                flush=True,
            )
    gap = max(
        float(np.abs(a - b).max())
        for a, b in zip(features["shared"], features["unshared"], strict=True)
    )
    largest = max(float(np.abs(a).max()) for a in features["unshared"])
    print(f"largest feature difference: {gap:.2e} (largest feature: {largest:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
