"""Does the PRM learn from step labels? ProcessBench F1 and step AUROC on held-out problems.

    .venv/bin/python -m bench.prm_quality                      # constant, tiny, smollm2-135m
    .venv/bin/python -m bench.prm_quality --models smollm2-135m --per-subset 100
    .venv/bin/python -m bench.prm_quality --subsets gsm8k,math \
        --train-subsets gsm8k,math,olympiadbench,omnimath     # judged on two, trained on four

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
- ``smollm2-135m-lora``: the same in ``lora`` mode, trained for ``--lora-minutes`` (CPU
  time is the point of the comparison) on a sample of the training problems.

Figures: per subset and over all, ProcessBench F1 (the harmonic mean of the accuracy on
erroneous solutions, where the predicted first error must be the labeled one, and on
correct solutions) and the two accuracies; step AUROC (P(-1), negative against positive
steps) over the test problems' labeled steps; 95% bootstrap intervals (solutions for F1,
problems for AUROC). Also the seconds each model took to train and to score.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from transformers import PreTrainedTokenizerBase

from app.config import get_settings
from app.content_keys import normalized_problem
from bench.prmbench import prmbench_without
from worker import evaluate
from worker.assess import by_subset, first_errors, step_set
from worker.eval_sets import (
    PROCESSBENCH_SUBSETS,
    ProcessBenchItem,
    fixed_sample,
    load_processbench,
    split_by_problem_hash,
)
from worker.features import FeatureCache, cache_for
from worker.model import (
    HEAD_READINGS,
    LABELS,
    LAST_LAYER,
    PRM,
    TINY,
    TrainingArgs,
    training_args_for,
)
from worker.pretrained import resolve_base_model
from worker.score import Throughput, fill_cache, step_probabilities
from worker.train import Example, fit, setup

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CALIBRATION_SHARE = 0.2
"""Share of the training problems kept for choosing the threshold (not trained on)."""
MODELS = ("constant", "tiny", "smollm2-135m", "smollm2-135m-lora")
DEFAULT_MODELS = ("constant", "tiny", "smollm2-135m")
LINEAR: dict[str, Any] = {"head_hidden": 0, "head_members": 1, "head_class_balance": False}
"""Every head field a preset does not name: whatever the worker's default head becomes, a
preset stays the head it was measured as."""
ALL_READINGS = LINEAR | {"head_readings": HEAD_READINGS}
HEADS: dict[str, dict[str, Any]] = {
    "last": LINEAR | {"head_readings": LAST_LAYER},
    "ends": LINEAR | {"head_readings": ("end@1", "end@0.75", "end@0.5")},
    "all": ALL_READINGS,
    "all-l2x10": ALL_READINGS | {"weight_decay": 1.0},
    "all-balanced": ALL_READINGS | {"head_class_balance": True},
    "all-mlp": ALL_READINGS | {"head_hidden": 256},
    "all-x5": ALL_READINGS | {"head_members": 5},
    "all-mlp-x5": ALL_READINGS | {"head_hidden": 256, "head_members": 5},
}
"""Heads on SmolLM2's cached features, each a model ``smollm2-135m:<name>``: what they read
(worker/model.py ``HEAD_READINGS``) and how (worker/head.py), the rest as the CPU default.
``smollm2-135m`` alone is the worker's default head."""


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


Probabilities = Callable[[Sequence[ProcessBenchItem]], list[np.ndarray]]
"""A trained model, as what the figures need: per item, (steps, 3) class probabilities."""


@dataclass
class Trained:
    name: str
    probabilities: Probabilities
    train_seconds: float
    notes: dict[str, Any] = field(default_factory=dict)


def train_constant(data: Split, _options: argparse.Namespace) -> Trained:
    """The training set's class shares for every step."""
    labels = [label for e in examples(data.train) for _, label in e.labeled]
    shares = np.array([labels.count(c) for c in LABELS], dtype=np.float64) / len(labels)

    def probabilities(items: Sequence[ProcessBenchItem]) -> list[np.ndarray]:
        return [np.tile(shares, (len(i.steps), 1)) for i in items]

    return Trained("constant", probabilities, 0.0, {"class_shares": shares.tolist()})


def train_worker_model(
    name: str, args: TrainingArgs, data: Split, deadline: float | None, cache_dir: Path
) -> Trained:
    """Train with the worker's ``fit`` (and its feature cache in head mode)."""
    started = time.process_time()
    model, tokenizer, _device = setup(args)
    cache = cache_for(model, args, cache_dir)
    if cache is not None:
        warm(model, tokenizer, args, cache, [*data.train, *data.calibration, *data.test])
    stop = None if deadline is None else (lambda: time.process_time() - started > deadline)
    stats = fit(model, tokenizer, examples(data.train), args, should_stop=stop, cache=cache)
    train_seconds = time.process_time() - started

    def probabilities(items: Sequence[ProcessBenchItem]) -> list[np.ndarray]:
        scored, _ = step_probabilities(
            model, tokenizer, [(i.problem, i.steps) for i in items], args, cache
        )
        return scored

    notes = {
        "mode": args.mode,
        **(
            {
                "readings": list(args.head_readings),
                "members": args.head_members,
                "hidden": args.head_hidden,
                "class_balance": args.head_class_balance,
                "weight_decay": args.weight_decay,
            }
            if args.mode == "head"
            else {}
        ),
        "optimizer_steps": stats.optimizer_steps,
        "epochs": stats.epochs,
        "stopped_at_deadline": stats.stopped,
        "labeled_steps": stats.labeled_steps,
        "feature_seconds": round(stats.feature_seconds, 1),
    }
    return Trained(name, probabilities, train_seconds, notes)


def warm(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    args: TrainingArgs,
    cache: FeatureCache,
    items: list[ProcessBenchItem],
) -> None:
    """Fill the feature cache first, saying how far it is: a cold cache takes long."""
    started = time.perf_counter()

    def report(done: int, throughput: Throughput) -> None:
        print(
            f"[{time.perf_counter() - started:7.1f} s] features: {done} of {len(items)} "
            f"solutions, {throughput.tokens_per_second:.0f} tokens/s",
            file=sys.stderr,
            flush=True,
        )

    fill_cache(model, tokenizer, [(i.problem, i.steps) for i in items], args, cache, report)


def figures(trained: Trained, data: Split, seed: int, judge: str = "test") -> dict[str, Any]:
    """ProcessBench F1 per subset and overall, step AUROC per subset and overall, on the
    test problems; or, with ``judge="calibration"``, on the calibration problems alone (the
    threshold chosen on them too, so their F1 flatters every model alike): the figures to
    choose by, which never read a test problem."""
    started = time.process_time()
    calibration = trained.probabilities(data.calibration)
    judged_items = data.calibration if judge == "calibration" else data.test
    judged = calibration if judge == "calibration" else trained.probabilities(data.test)
    score_seconds = time.process_time() - started
    threshold = evaluate.choose_threshold(first_errors(data.calibration, calibration))
    subsets = by_subset(judged_items, judged)
    aurocs: dict[str, Any] = {}
    for name in subsets:
        chosen = [k for k, item in enumerate(judged_items) if item.subset == name]
        aurocs[name] = evaluate.step_auroc(
            step_set(examples([judged_items[k] for k in chosen]), [judged[k] for k in chosen]),
            seed,
        )
    processbench = evaluate.processbench_figures(subsets, threshold, seed)
    return {
        "model": trained.name,
        "judged_on": judge,
        "train_cpu_seconds": round(trained.train_seconds, 1),
        "score_cpu_seconds": round(score_seconds, 1),
        "notes": trained.notes,
        "threshold": threshold,
        "processbench": processbench,
        "step_auroc": {
            "all": evaluate.step_auroc(step_set(examples(judged_items), judged), seed),
            **aurocs,
        },
    }


def _show(estimate: dict[str, Any] | None) -> str:
    if not estimate or "value" not in estimate:
        return "n/a"
    return f"{estimate['value']:.3f} [{estimate['low']:.3f}, {estimate['high']:.3f}]"


def print_table(results: list[dict[str, Any]], out: Any = sys.stdout) -> None:
    print(
        "| model | subset | ProcessBench F1 [95% CI] | acc. erroneous | acc. correct "
        "| step AUROC [95% CI] |",
        file=out,
    )
    print("|---|---|---|---|---|---|", file=out)
    for result in results:
        pb = result["processbench"]
        for name, subset in pb["subsets"].items():
            error, correct = subset["accuracy_erroneous"], subset["accuracy_correct"]
            print(
                f"| {result['model']} | {name} | {_show(subset['f1'])} | "
                f"{error:.3f} | {correct:.3f} | {_show(result['step_auroc'][name])} |",
                file=out,
            )
        print(
            f"| {result['model']} | **mean / all** | {_show(pb['f1'])} | | | "
            f"{_show(result['step_auroc']['all'])} |",
            file=out,
        )
    print(file=out)
    for result in results:
        print(
            f"{result['model']}: train {result['train_cpu_seconds']} CPU s, score "
            f"{result['score_cpu_seconds']} CPU s, threshold {result['threshold']:.3f}, "
            f"{json.dumps(result['notes'])}",
            file=out,
        )


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
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiny-epochs", type=int, default=5)
    parser.add_argument(
        "--lora-minutes", type=float, default=20.0, help="CPU minutes of LoRA training"
    )
    parser.add_argument(
        "--judge",
        choices=("test", "calibration"),
        default="test",
        help="calibration: judge on the calibration problems, never reading a test one",
    )
    parser.add_argument(
        "--extra-train",
        choices=("prmbench",),
        help="also train on PRMBench's problems that are no ProcessBench calibration or "
        "test problem (bench/prmbench.py)",
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
    judged = options.subsets.split(",")
    trained = (options.train_subsets or options.subsets).split(",")
    items = fixed_sample(
        load_processbench(options.data, list(dict.fromkeys([*judged, *trained]))),
        options.per_subset,
        options.seed,
    )
    if not items:
        parser.error(f"no ProcessBench files in {options.data}")
    data = restrict(split(items, options.test_share, options.seed), judged, trained)
    if options.extra_train == "prmbench":
        data = with_prmbench(data, options)
    print(
        f"ProcessBench: {len(data.train)} training, {len(data.calibration)} calibration, "
        f"{len(data.test)} test solutions",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="prm-quality-features-") as fresh:
        shared = get_settings().checkpoint_dir / "feature-cache"
        options.cache_dir = Path(fresh) if options.fresh_features else shared
        results = _run_models(options, data)
    print_table(results)
    return 0


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


def _run_models(options: argparse.Namespace, data: Split) -> list[dict[str, Any]]:
    """Train and judge each model in turn, printing (and saving) each one's figures."""
    results: list[dict[str, Any]] = []
    for name in options.models.split(","):
        started = time.perf_counter()
        trained = _train(name, data, options)
        result = figures(trained, data, options.seed, options.judge)
        result["wall_seconds"] = round(time.perf_counter() - started, 1)
        results.append(result)
        print(f"{name}: done in {result['wall_seconds']} s", flush=True)
        # Each model's figures as soon as they are known: a long run stopped early keeps them.
        print_table([result])
        if options.json:
            options.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


def _train(name: str, data: Split, options: argparse.Namespace) -> Trained:
    return _train_model(name, data, options, options.cache_dir)


def _train_model(name: str, data: Split, options: argparse.Namespace, cache_dir: Path) -> Trained:
    if name == "constant":
        return train_constant(data, options)
    if name == "tiny":
        args = training_args_for(TINY, device="cpu", epochs=options.tiny_epochs, seed=options.seed)
        return train_worker_model(name, args, data, None, cache_dir)
    directory = resolve_base_model("smollm2-135m", get_settings().model_dir)
    if name == "smollm2-135m" or name.removeprefix("smollm2-135m:") in HEADS:
        head = HEADS.get(name.removeprefix("smollm2-135m:"), {})
        args = training_args_for(directory, mode="head", device="cpu", seed=options.seed, **head)
        return train_worker_model(name, args, data, None, cache_dir)
    if name == "smollm2-135m-lora":
        args = training_args_for(
            directory, mode="lora", device="cpu", max_length=1024, seed=options.seed
        )
        return train_worker_model(name, args, data, options.lora_minutes * 60, cache_dir)
    known = [*MODELS, *(f"smollm2-135m:{head}" for head in HEADS)]
    raise SystemExit(f"unknown model {name!r}: choose from {', '.join(known)}")


if __name__ == "__main__":
    sys.exit(main())
