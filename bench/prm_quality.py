"""Does the PRM learn from step labels? ProcessBench F1 and step AUROC on held-out problems.

The command line and the run; beside it, by job: prm_quality_data.py (the split, PRM800K phase
1's ratings), prm_quality_training.py (the models and their training), prm_quality_report.py
(judging a trained model, the figures and the table), prm_thresholds.py (one threshold or
one per subset).

    .venv/bin/python -m bench.prm_quality                      # constant, tiny, smollm2-135m
    .venv/bin/python -m bench.prm_quality --models smollm2-135m --per-subset 100
    .venv/bin/python -m bench.prm_quality --subsets gsm8k,math \
        --train-subsets gsm8k,math,olympiadbench,omnimath     # judged on two, trained on four
    python -m bench.prm_quality --device cuda --train-seeds 0,1,2 \
        --models smollm2-135m,smollm2-135m-full,smollm2-135m-lora   # on a GPU (issue 27)
    .venv/bin/python -m bench.prm_quality --base-model qwen2.5-coder-0.5b \
        --extra-train phase1 --phase1-problems 30     # another backbone, phase-1 labels added
    .venv/bin/python -m bench.prm_quality --recommended --json PATH   # the CPU recommendation

The data: ProcessBench (../shared/data, or ``--data``), 3,400 solutions with expert
first-error labels, turned into step labels as PRM800K gives them: steps before the first
error positive, the error step negative, later steps unlabeled. Problems are split by a
hash of their text (``--seed``): ``--test-share`` of them are the test problems, never
trained on and never used to choose anything; of the others, ``CALIBRATION_SHARE`` are
calibration problems (where the first-error threshold is chosen) and the rest are
trained on. ``--train-subsets`` trains on other subsets' training problems as well; a
problem's side depends on its text alone, so the test problems stay the same. Features
are cached first, with a progress line on stderr every 64 solutions computed.

The models, each trained and scored by the worker's own code (worker/train.py ``fit``,
worker/score.py, worker/evaluate.py):
- ``constant``: every step gets the training set's class shares (what a PRM that learned
  nothing about the steps predicts);
- ``tiny``: the worker's tiny decoder, trained from scratch (full mode);
- ``smollm2-135m``: SmolLM2-135M-Instruct in the CPU default, ``head`` mode (frozen
  backbone, cached step features, a trained linear head), prepared first if needed;
- ``smollm2-135m-full``: the same fine-tuned whole, ``full`` mode, the mode's defaults;
- ``smollm2-135m-lora``: the same in ``lora`` mode. On the CPU both train for at most
  ``--lora-minutes`` of CPU time (CPU time is the point of the comparison there) on
  sequences of 1,024 tokens; on a GPU (``--device cuda``) they run every epoch the mode
  asks for, at 2,048 tokens, in the worker's CUDA precision (bf16 autocast). Head mode on a
  GPU runs its backbone in float32, so its features (and cache) are those of the CPU
  default without AMX tiles.

``--base-model`` (a name of worker/pretrained.py ``PRETRAINED``, or a directory) puts
another backbone under the ``smollm2-135m*`` models, which are then named after it; each
backbone has a feature cache of its own. ``--extra-train phase1`` adds PRM800K phase 1's
human step ratings (worker/phase1.py; ``--phase1-problems``: a fixed sample of its training
problems) to every model's training data, every ProcessBench calibration or test problem
left out. On test runs every model is also judged by step AUROC on PRM800K phase 1's test
steps (``PHASE1_TEST``; every ProcessBench problem left out, 28 of its 101 problems;
``--phase1-test-problems``). ``--recommended`` runs ``RECOMMENDED``.

``--train-seeds`` trains each model once per seed (``TrainingArgs.seed``: its head's
initialization, batch order, the tiny model's weights; the split stays ``--seed``'s).

Figures: per subset and over all, ProcessBench F1 (the harmonic mean of the accuracy on
erroneous solutions, where the predicted first error must be the labeled one, and on
correct solutions) and the two accuracies; step AUROC (P(-1), negative against positive
steps) over the test problems' labeled steps; 95% bootstrap intervals (solutions for F1,
problems for AUROC). Over several training seeds a figure is the seeds' mean, and its
interval draws a seed and the test items together in each resample (``pooled_estimate``),
so it holds the spread between seeds as well as the test set's; each seed's own figures
(with test-only intervals) come with them. Also the seconds each model took to train and
to score.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from app.core.config import get_settings
from bench import SHARED_DATA
from bench.prm_quality_data import (
    Split,
    phase1_judged,
    phase1_training,
    split_from_options,
    with_prmbench,
)
from bench.prm_quality_report import figures, judge_model, print_table
from bench.prm_quality_training import (
    DEFAULT_BASE,
    DEFAULT_MODELS,
    MODELS,
    SEEDLESS,
    known_models,
    train_model,
)
from worker.device import resolve_device
from worker.eval_sets import PROCESSBENCH_SUBSETS
from worker.pretrained import PRETRAINED

RECOMMENDED: dict[str, Any] = {
    "models": "smollm2-135m",
    "base_model": DEFAULT_BASE,
    "extra_train": "phase1",
    "phase1_problems": 30,
    "train_seeds": [0, 1, 2],
}
"""The configuration recommended for a team with a CPU (BENCHMARKS.md, "Issue 38: backbones
and PRM800K phase 1, the rule"): the worker's default head on SmolLM2-135M, trained with 30
PRM800K phase-1 training problems' human ratings added (configuration B, the rule's pick on
calibration; no Qwen backbone can be picked for a CPU: its features cost more than 1.5
times SmolLM2's there). Its test confirmation (BENCHMARKS.md, "Issue 38: the
confirmation") found it level with the head without phase 1; it stays the pick, since the
rule is not re-run on test."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.prm_quality", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--models", default=",".join(DEFAULT_MODELS), help=f"from {', '.join(MODELS)}"
    )
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument(
        "--subsets", default=",".join(PROCESSBENCH_SUBSETS), help="judged on (and calibrated)"
    )
    parser.add_argument(
        "--train-subsets",
        help="trained on (default: --subsets); their training problems only, never a test one",
    )
    parser.add_argument(
        "--per-subset", type=int, help="a fixed sample of each subset (default: all)"
    )
    parser.add_argument("--test-share", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0, help="the split's (and bootstrap's)")
    parser.add_argument(
        "--train-seeds",
        type=seed_list,
        help="train each model once per seed, e.g. 0,1,2; figures pool them (default: --seed)",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda", "auto"),
        default="cpu",
        help="where the worker's models train and score (auto: cuda where there is one)",
    )
    parser.add_argument("--tiny-epochs", type=int, default=5)
    parser.add_argument(
        "--lora-minutes",
        type=float,
        default=20.0,
        help="CPU minutes of lora or full fine-tuning (no limit on cuda)",
    )
    parser.add_argument(
        "--judge",
        choices=("test", "calibration"),
        default="test",
        help="calibration: judge on the calibration problems, never reading a test one",
    )
    parser.add_argument(
        "--extra-train",
        choices=("prmbench", "phase1"),
        help="also train on PRMBench's problems that are no ProcessBench calibration or "
        "test problem (bench/prmbench.py), or on PRM800K phase 1's training problems' human "
        "ratings (worker/phase1.py; none is a ProcessBench problem, which is checked)",
    )
    parser.add_argument(
        "--phase1-problems",
        type=int,
        help="with --extra-train phase1: a fixed sample of this many training problems",
    )
    parser.add_argument(
        "--phase1-test-problems",
        type=int,
        help="step AUROC on a fixed sample of this many PRM800K phase-1 test problems "
        "(ProcessBench's left out first; default: all of them, 0: none)",
    )
    parser.add_argument(
        "--base-model",
        default=DEFAULT_BASE,
        help=f"the backbone of the worker's models ({', '.join(PRETRAINED)}, or a "
        "directory); the smollm2-135m* models then run on it, and are named after it",
    )
    parser.add_argument(
        "--recommended",
        action="store_true",
        help="the configuration recommended for a CPU team (RECOMMENDED): "
        + ", ".join(f"{k}={v}" for k, v in RECOMMENDED.items()),
    )
    parser.add_argument(
        "--prmbench-trajectories", type=int, help="with --extra-train: a fixed sample of them"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--fresh-features",
        action="store_true",
        help="head mode computes every feature anew (an empty cache), so its CPU time "
        "includes the backbone's work; by default the worker's feature cache is reused",
    )
    options = parser.parse_args(argv)
    if options.recommended:
        vars(options).update(RECOMMENDED)
    unknown = [name for name in options.models.split(",") if name not in known_models()]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r}: choose from {', '.join(known_models())}")
    options.device = resolve_device(options.device).type
    options.train_seeds = options.train_seeds or [options.seed]
    data = split_from_options(options)
    if data is None:
        parser.error(f"no ProcessBench files in {options.data}")
    if options.extra_train == "prmbench":
        data = with_prmbench(data, options)
    if options.judge == "calibration":
        # Choosing never reads a test problem, nor spends time on its features.
        data = dataclasses.replace(data, test=[])
    options.extra_examples = phase1_training(options) if options.extra_train == "phase1" else []
    options.phase1_test = phase1_judged(options)
    print(
        f"ProcessBench: {len(data.train)} training, {len(data.calibration)} calibration, "
        f"{len(data.test)} test solutions; on {options.device}, training seeds "
        f"{', '.join(map(str, options.train_seeds))}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="prm-quality-features-") as fresh:
        shared = get_settings().checkpoint_dir / "feature-cache"
        options.cache_dir = Path(fresh) if options.fresh_features else shared
        results = _run_models(options, data)
    print_table(results)
    return 0


def seed_list(text: str) -> list[int]:
    """``--train-seeds``: "0,1,2" as [0, 1, 2]."""
    return [int(seed) for seed in text.split(",")]


def _run_models(options: argparse.Namespace, data: Split) -> list[dict[str, Any]]:
    """Train and judge each model in turn (once per training seed), printing (and saving)
    each one's figures."""
    results: list[dict[str, Any]] = []
    for name in options.models.split(","):
        started = time.perf_counter()
        seeds = options.train_seeds[:1] if name in SEEDLESS else options.train_seeds
        # Each seed's model is judged, then let go, before the next one is trained.
        runs = []
        for seed in seeds:
            trained = train_model(name, data, options, seed)
            runs.append(judge_model(trained, data, seed, options.judge, options.phase1_test))
            # How far a run got, should it be stopped before the model's figures print.
            elapsed = time.perf_counter() - started
            print(f"{name}: seed {seed} trained and judged, {elapsed:.1f} s so far", flush=True)
        label = name.replace(DEFAULT_BASE, Path(options.base_model).name)
        result = figures(label, runs, options.seed, options.judge)
        result["wall_seconds"] = round(time.perf_counter() - started, 1)
        results.append(result)
        print(f"{name}: done in {result['wall_seconds']} s", flush=True)
        # Each model's figures as soon as they are known: a long run stopped early keeps them.
        if options.json:
            options.json.write_text(json.dumps(results, indent=2) + "\n")
        print_table([result])
    return results


if __name__ == "__main__":
    sys.exit(main())
