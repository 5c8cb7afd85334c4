"""Does the PRM learn from step labels? ProcessBench F1 and step AUROC on held-out problems.

Why one module over 500 lines: not split yet, as it is the script of a pre-registered run
that was in progress when issue 42's splits were made, and was left as it ran; its split,
training, judging and tables are the next split by job.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from transformers import PreTrainedTokenizerBase

from app.content_keys import normalized_problem
from app.core.config import get_settings
from app.estimates import RESAMPLES, percentile_interval, resample, split_units
from bench.prm_thresholds import decide, describe_rule, threshold_figures
from bench.prmbench import prmbench_without
from worker import evaluate, phase1
from worker.assess import by_subset, first_errors, step_set
from worker.device import Device, resolve_device
from worker.eval_sets import (
    PROCESSBENCH_SUBSETS,
    ProcessBenchItem,
    fixed_sample,
    load_processbench,
    split_by_problem_hash,
)
from worker.evaluate import Estimate, FirstErrors, Statistic, StepSet
from worker.features import FeatureCache, cache_for
from worker.layout import LABELS
from worker.model import HEAD_READINGS, LAST_LAYER, PRM
from worker.pretrained import PRETRAINED, resolve_base_model
from worker.score import Throughput, fill_cache, step_probabilities
from worker.train import Example, fit, setup
from worker.training_args import TINY, TrainingArgs, training_args_for

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DEFAULT_BASE = "smollm2-135m"
PHASE1_TEST = "prm800k-phase1-test"
"""The step AUROC set of PRM800K phase 1's test problems (human ratings), ProcessBench's
problems left out."""
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
CALIBRATION_SHARE = 0.2
"""Share of the training problems kept for choosing the threshold (not trained on)."""
FULL = "smollm2-135m-full"
LORA = "smollm2-135m-lora"
MODELS = ("constant", "tiny", "smollm2-135m", FULL, LORA)
SEEDLESS = ("constant",)
"""Models that no training seed changes: trained once whatever ``--train-seeds`` says."""
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


Scored = ProcessBenchItem | Example
"""What a trained model scores: anything with a problem and its steps."""
Probabilities = Callable[[Sequence[Scored]], list[np.ndarray]]
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

    def probabilities(items: Sequence[Scored]) -> list[np.ndarray]:
        return [np.tile(shares, (len(i.steps), 1)) for i in items]

    return Trained("constant", probabilities, 0.0, {"class_shares": shares.tolist()})


def train_worker_model(
    name: str,
    args: TrainingArgs,
    data: Split,
    deadline: float | None,
    cache_dir: Path,
    extra: Sequence[Example] = (),
    judged_extra: Sequence[Example] = (),
) -> Trained:
    """Train with the worker's ``fit`` (and its feature cache in head mode) on the split's
    training items and ``extra`` examples; ``deadline`` in CPU seconds. ``judged_extra``
    (examples scored later, e.g. PRM800K phase 1's test steps) warm the cache too."""
    started = time.process_time()
    started_wall = time.perf_counter()
    model, tokenizer, _device = setup(args)
    cache = cache_for(model, args, cache_dir)
    if cache is not None:
        warm(
            model,
            tokenizer,
            args,
            cache,
            [*data.train, *extra, *data.calibration, *data.test, *judged_extra],
        )
    stop = None if deadline is None else (lambda: time.process_time() - started > deadline)
    training = [*examples(data.train), *extra]
    stats = fit(model, tokenizer, training, args, should_stop=stop, cache=cache)
    train_seconds = time.process_time() - started
    # CPU time leaves out a GPU's work: the wall clock says what a GPU run took.
    train_wall_seconds = time.perf_counter() - started_wall

    def probabilities(items: Sequence[Scored]) -> list[np.ndarray]:
        scored, _ = step_probabilities(
            model, tokenizer, [(i.problem, i.steps) for i in items], args, cache
        )
        return scored

    notes = {
        "mode": args.mode,
        "base_model": Path(args.base_model).name,
        "extra_examples": len(extra),
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
        "device": args.device,
        "max_length": args.max_length,
        "train_wall_seconds": round(train_wall_seconds, 1),
    }
    return Trained(name, probabilities, train_seconds, notes)


def warm(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    args: TrainingArgs,
    cache: FeatureCache,
    items: Sequence[Scored],
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


@dataclass(frozen=True)
class Judged:
    """One trained model as the figures need it: its threshold, and its probabilities on
    the judged items as first errors and labeled steps. The model itself is let go, so a
    GPU holds one fine-tuned copy at a time however many seeds are trained."""

    train_seed: int
    threshold: float
    subsets: dict[str, FirstErrors]
    steps: dict[str, StepSet]
    """The judged items' labeled steps by problem: ``all`` of them, then each subset's."""
    train_seconds: float
    score_seconds: float
    notes: dict[str, Any]
    threshold_rule: dict[str, Any] | None = None
    """On calibration runs: one threshold or one per subset, cross-fitted (prm_thresholds)."""


def judge_model(
    trained: Trained,
    data: Split,
    train_seed: int,
    judge: str = "test",
    phase1_test: Sequence[Example] = (),
) -> Judged:
    """Score the calibration items (the threshold is chosen there) and the judged ones: the
    test problems, or with ``judge="calibration"`` the calibration problems alone (their F1
    then flatters every model alike): the figures to choose by, never reading a test one.
    ``phase1_test``'s labeled steps are judged too (``PHASE1_TEST``), on test runs only."""
    started = time.process_time()
    calibration = trained.probabilities(data.calibration)
    items = data.calibration if judge == "calibration" else data.test
    judged = calibration if judge == "calibration" else trained.probabilities(items)
    steps = {"all": step_set(examples(items), judged)}
    for name in dict.fromkeys(item.subset for item in items):
        chosen = [k for k, item in enumerate(items) if item.subset == name]
        steps[name] = step_set(examples([items[k] for k in chosen]), [judged[k] for k in chosen])
    if phase1_test and judge == "test":
        steps[PHASE1_TEST] = step_set(phase1_test, trained.probabilities(phase1_test))
    calibrated = first_errors(data.calibration, calibration)
    rule = threshold_figures(data.calibration, calibrated) if judge == "calibration" else None
    score_seconds = time.process_time() - started
    return Judged(
        train_seed,
        evaluate.choose_threshold(calibrated),
        by_subset(items, judged),
        steps,
        trained.train_seconds,
        score_seconds,
        trained.notes,
        rule,
    )


def figures(name: str, runs: Sequence[Judged], seed: int, judge: str = "test") -> dict[str, Any]:
    """ProcessBench F1 per subset and overall, step AUROC per subset and overall: each the
    mean over the training seeds' ``runs`` with an interval over seeds and judged items
    (``pooled_estimate``), and each seed's figures alone. ``seed`` seeds the bootstrap."""
    return {
        "model": name,
        "judged_on": judge,
        "train_seeds": [run.train_seed for run in runs],
        "train_cpu_seconds": round(sum(run.train_seconds for run in runs), 1),
        "score_cpu_seconds": round(sum(run.score_seconds for run in runs), 1),
        "notes": shared_notes([run.notes for run in runs]),
        "thresholds": [run.threshold for run in runs],
        "processbench": pooled_processbench(runs, seed),
        "step_auroc": {
            subset: pooled_auroc([run.steps[subset] for run in runs], seed)
            for subset in runs[0].steps
        },
        "per_seed": [seed_figures(run, seed) for run in runs],
        **(
            {"threshold_rule": decide([run.threshold_rule for run in runs if run.threshold_rule])}
            if judge == "calibration"
            else {}
        ),
    }


def seed_figures(run: Judged, seed: int) -> dict[str, Any]:
    """One training seed's figures, their intervals over the judged items alone."""
    return {
        "train_seed": run.train_seed,
        "train_cpu_seconds": round(run.train_seconds, 1),
        "score_cpu_seconds": round(run.score_seconds, 1),
        "notes": run.notes,
        "threshold": run.threshold,
        "processbench": evaluate.processbench_figures(run.subsets, run.threshold, seed),
        "step_auroc": {
            subset: evaluate.step_auroc(steps, seed) for subset, steps in run.steps.items()
        },
    }


def shared_notes(notes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The notes every seed's run agrees on (its configuration, not its timings)."""
    return {
        key: value for key, value in notes[0].items() if all(n.get(key) == value for n in notes)
    }


def pooled_estimate(
    statistics: Sequence[Statistic],
    units: int,
    strata: Sequence[int] | None = None,
    seed: int = 0,
) -> Estimate | None:
    """The training seeds' mean figure (one statistic per seed, on the same units) and its
    95% interval over seeds and units drawn together; None where a seed's is undefined.

    Each resample draws one seed uniformly and the units as ``bootstrap`` does (within
    ``strata``), so the interval holds the spread between seeds as well as the units'
    sampling error: it is where one training run's figure falls, centred near the seeds'
    mean. (A bootstrap of the mean over seeds would be narrower, but from three seeds it
    can tell only ten sets apart.) With one seed this is ``bootstrap`` exactly; every model
    with as many seeds gets the same draws.
    """
    if not units or not statistics:
        return None
    everything = np.arange(units)
    values = [v for v in (statistic(everything) for statistic in statistics) if v is not None]
    if len(values) < len(statistics):
        return None
    value = float(np.mean(values))
    draws = resample(split_units(everything, strata), RESAMPLES, seed)
    # A child stream of the draws' seed: picks independent of the units drawn.
    picker = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    picks = picker.integers(0, len(statistics), RESAMPLES)
    resampled = [statistics[pick](draw) for pick, draw in zip(picks, draws, strict=True)]
    defined = [d for d in resampled if d is not None]
    low, high = percentile_interval(defined) if defined else (value, value)
    return Estimate(value, low, high, units)


def pooled_processbench(runs: Sequence[Judged], seed: int) -> dict[str, Any]:
    """``evaluate.processbench_figures`` over the seeds' runs, each at its own threshold:
    F1 pooled (``pooled_estimate``), the accuracies the seeds' means."""
    figures: dict[str, Any] = {"thresholds": [run.threshold for run in runs], "subsets": {}}
    for name, solutions in runs[0].subsets.items():
        f1 = pooled_estimate(
            [run.subsets[name].f1_statistic(run.threshold) for run in runs],
            len(solutions),
            seed=seed,
        )
        accuracies = [run.subsets[name].accuracies(run.threshold) for run in runs]
        figures["subsets"][name] = {
            "f1": f1.as_dict() if f1 else None,
            "accuracy_erroneous": _mean([error for error, _ in accuracies]),
            "accuracy_correct": _mean([correct for _, correct in accuracies]),
            "erroneous": int(solutions.erroneous.sum()),
            "correct": int((~solutions.erroneous).sum()),
        }
    mean = None
    if runs[0].subsets:
        statistics = [evaluate.mean_f1_statistic(run.subsets, run.threshold) for run in runs]
        strata = statistics[0][1]
        mean = pooled_estimate([s for s, _ in statistics], len(strata), strata.tolist(), seed)
    figures["f1"] = mean.as_dict() if mean else None
    return figures


def pooled_auroc(steps: Sequence[StepSet], seed: int) -> dict[str, Any]:
    """``evaluate.step_auroc`` over the seeds' runs (the same labeled steps in each)."""
    shortage = steps[0].shortage()
    if shortage is not None:
        return {"status": shortage}
    statistics = [s.auroc_statistic() for s in steps]
    estimate = pooled_estimate(statistics, len(steps[0].ratings), seed=seed)
    if estimate is None:
        return {"status": "not enough data: one class only"}
    return {"status": "ok", **estimate.as_dict()}


def _mean(values: Sequence[float | None]) -> float | None:
    """The seeds' mean; None where a seed has none (a class absent from the judged items)."""
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if len(present) == len(values) else None


def show_estimate(estimate: dict[str, Any] | None) -> str:
    if not estimate or "value" not in estimate:
        return "n/a"
    return f"{estimate['value']:.3f} [{estimate['low']:.3f}, {estimate['high']:.3f}]"


def _point(estimate: dict[str, Any] | None) -> str:
    return f"{estimate['value']:.3f}" if estimate and "value" in estimate else "n/a"


def _share(value: float | None) -> str:
    """An accuracy; n/a where the judged items of a subset hold no solution of its kind."""
    return "n/a" if value is None else f"{value:.3f}"


def _label(result: dict[str, Any]) -> str:
    seeds = len(result["train_seeds"])
    return result["model"] if seeds == 1 else f"{result['model']} ({seeds} seeds)"


def print_table(results: list[dict[str, Any]], out: Any = sys.stdout) -> None:
    """Each model's rows (its pooled figures over seeds), then its costs and each seed's."""
    print(
        "| model | subset | ProcessBench F1 [95% CI] | acc. erroneous | acc. correct "
        "| step AUROC [95% CI] |",
        file=out,
    )
    print("|---|---|---|---|---|---|", file=out)
    for result in results:
        pb, model = result["processbench"], _label(result)
        for name, subset in pb["subsets"].items():
            error, correct = subset["accuracy_erroneous"], subset["accuracy_correct"]
            print(
                f"| {model} | {name} | {show_estimate(subset['f1'])} | {_share(error)} | "
                f"{_share(correct)} | {show_estimate(result['step_auroc'][name])} |",
                file=out,
            )
        print(
            f"| {model} | **mean / all** | {show_estimate(pb['f1'])} | | | "
            f"{show_estimate(result['step_auroc']['all'])} |",
            file=out,
        )
        if PHASE1_TEST in result["step_auroc"]:
            print(
                f"| {model} | {PHASE1_TEST} | | | | "
                f"{show_estimate(result['step_auroc'][PHASE1_TEST])} |",
                file=out,
            )
    print(file=out)
    for result in results:
        thresholds = ", ".join(f"{t:.3f}" for t in result["thresholds"])
        print(
            f"{result['model']}: train {result['train_cpu_seconds']} CPU s, score "
            f"{result['score_cpu_seconds']} CPU s, threshold {thresholds}, "
            f"{json.dumps(result['notes'])}",
            file=out,
        )
        if len(result["per_seed"]) > 1:
            seeds = "; ".join(
                f"seed {run['train_seed']}: F1 {_point(run['processbench']['f1'])}, "
                f"AUROC {_point(run['step_auroc']['all'])}, "
                f"{run['notes'].get('train_wall_seconds', 0.0)} s"
                for run in result["per_seed"]
            )
            print(f"  each seed (training wall seconds): {seeds}", file=out)
        if "threshold_rule" in result:
            print(f"  {describe_rule(result['threshold_rule'])}", file=out)


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


def split_from_options(options: argparse.Namespace) -> Split | None:
    """The split ``--subsets``, ``--train-subsets``, ``--per-subset``, ``--test-share`` and
    ``--seed`` ask for, from ``--data``; None when it holds no ProcessBench file."""
    judged = options.subsets.split(",")
    trained = (options.train_subsets or options.subsets).split(",")
    items = fixed_sample(
        load_processbench(options.data, list(dict.fromkeys([*judged, *trained]))),
        options.per_subset,
        options.seed,
    )
    if not items:
        return None
    return restrict(split(items, options.test_share, options.seed), judged, trained)


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


def _phase1_file(options: argparse.Namespace) -> Path:
    return Path(options.data) / phase1.FILE_NAME


def _processbench_problems(options: argparse.Namespace, sides: str) -> set[str]:
    """The normalized ProcessBench problems (every subset) of the split's ``sides``:
    ``judged`` (calibration and test) or ``all``."""
    everything = split(load_processbench(options.data), options.test_share, options.seed)
    items = everything.calibration + everything.test
    if sides == "all":
        items += everything.train
    return {normalized_problem(i.problem) for i in items}


def phase1_training(options: argparse.Namespace) -> list[Example]:
    """PRM800K phase 1's training step labels (a fixed sample of ``--phase1-problems``),
    every problem that is a ProcessBench calibration or test problem left out."""
    judged = _processbench_problems(options, "judged")
    everything = phase1.training_examples(_phase1_file(options))
    kept = [e for e in everything if normalized_problem(e.problem) not in judged]
    chosen = phase1.problem_sample(kept, options.phase1_problems, options.seed)
    print(
        f"PRM800K phase 1: {len(chosen)} step labels of "
        f"{len({e.problem for e in chosen})} training problems added to training; "
        f"{len(everything) - len(kept)} left out (a ProcessBench calibration or test problem)",
        flush=True,
    )
    return chosen


def phase1_judged(options: argparse.Namespace) -> list[Example]:
    """PRM800K phase 1's test step labels to judge step AUROC on (a fixed sample of
    ``--phase1-test-problems``), every ProcessBench problem left out (28 are in its math
    subset: a model may have trained or calibrated on them)."""
    path = _phase1_file(options)
    if options.phase1_test_problems == 0 or options.judge != "test" or not path.exists():
        return []
    judged = phase1.judging_examples(path, _processbench_problems(options, "all"))
    chosen = phase1.problem_sample(judged, options.phase1_test_problems, options.seed)
    print(
        f"PRM800K phase 1 test: {len(chosen)} step labels of "
        f"{len({e.problem for e in chosen})} problems judged (ProcessBench's left out)",
        flush=True,
    )
    return chosen


def seed_list(text: str) -> list[int]:
    """``--train-seeds``: "0,1,2" as [0, 1, 2]."""
    return [int(seed) for seed in text.split(",")]


def known_models() -> list[str]:
    return [*MODELS, *(f"smollm2-135m:{head}" for head in HEADS)]


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
            trained = _train(name, data, options, seed)
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


def _train(name: str, data: Split, options: argparse.Namespace, train_seed: int) -> Trained:
    if name == "constant":
        return train_constant(data, options)
    if name == "tiny":
        args = training_args_for(
            TINY, device=options.device, epochs=options.tiny_epochs, seed=train_seed
        )
        return train_worker_model(name, args, data, None, options.cache_dir)
    directory = resolve_base_model(options.base_model, get_settings().model_dir)
    args = smollm2_args(name, directory, options.device, train_seed)
    deadline = cpu_deadline(args, options.lora_minutes)
    return train_worker_model(
        name,
        args,
        data,
        deadline,
        options.cache_dir,
        options.extra_examples,
        options.phase1_test,
    )


def cpu_deadline(args: TrainingArgs, minutes: float) -> float | None:
    """The CPU seconds fine-tuning may take on the CPU; None for a head or on a GPU.

    It counts this process's CPU time: on a GPU that is the launching thread's, not the
    training's, and there the modes run every epoch they ask for in minutes anyway.
    """
    return minutes * 60 if args.mode != "head" and args.device == "cpu" else None


def smollm2_args(name: str, directory: str, device: Device, train_seed: int) -> TrainingArgs:
    """SmolLM2's training arguments for ``name``: a head (``smollm2-135m`` or a preset of
    ``HEADS``), ``FULL`` or ``LORA``; each the worker's defaults for its mode otherwise."""
    on_gpu = device == "cuda"
    if name in (FULL, LORA):
        # 1,024 tokens keep the CPU's time down; a GPU takes the worker's 2,048.
        return training_args_for(
            directory,
            mode="full" if name == FULL else "lora",
            device=device,
            max_length=2048 if on_gpu else 1024,
            seed=train_seed,
        )
    head = HEADS.get(name.removeprefix("smollm2-135m:"), {})
    # float32 on a GPU, as the CPU default is without AMX tiles (uses_bf16): the features,
    # and so the cache and the head, of the CPU table's float32 runs, not bf16 ones.
    return training_args_for(
        directory,
        mode="head",
        device=device,
        bf16=False if on_gpu else None,
        seed=train_seed,
        **head,
    )


if __name__ == "__main__":
    sys.exit(main())
