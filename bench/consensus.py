"""Consensus labels against all labels, measured: on one label budget, does a PRM trained
on one consensus label per solution beat one trained on every label?

    nice -n 19 env OMP_NUM_THREADS=1 .venv/bin/python -m bench.consensus \\
        --json test-artifacts/consensus.json
    .venv/bin/python -m bench.consensus --model tiny --per-subset 20 --budget 24 --seeds 2 \\
        --cache-dir /tmp/tiny-features   # seconds, to try it

The rule that reads the result is in BENCHMARKS.md ("Consensus against all labels"),
written before the run.

The data and the PRM are bench/active_learning.py's (bench/active_learning_data.py's
``load``, bench/active_learning_learner.py's ``Learner``):
ProcessBench's gsm8k and math subsets, a fixed sample of ``--per-subset`` solutions of each,
split by problem as bench/prm_quality.py splits it; its training problems are the pool the
simulated team labels, its calibration problems choose the first-error threshold, its test
problems only judge. The PRM is the worker's, in head mode on SmolLM2-135M's frozen
features (five linear members, active learning's learner), trained from scratch on each
arm's labels through the worker's own ``examples_from_record``.

The simulated team: ``--labelers`` labelers whose error rates are spread evenly over
``--error-low`` .. ``--error-high``. A labeler reports the solution's true first error
(ProcessBench's expert label) with probability 1 - q, and otherwise a first error drawn
uniformly from the other choices (each step, or no error); the label rates every step
before it +1, it -1 and stops there, as a PRM800K phase-2 label does. Neutral ratings are
not simulated.

Per seed (``--seeds``; a seed draws the solutions, who labels them and their noise; the
split and the head's initialization stay fixed), three arms on ``--budget`` labels each:

- ``all``: budget / ``--overlap`` pool solutions, each labeled by ``--overlap`` distinct
  labelers, every label a training example (what ``steplabel export`` gives a team today);
- ``consensus``: the same solutions and labels, one example per solution by app/consensus's
  rule (``rule.consensus``: the code the export runs); solutions marked for adjudication
  are left out, as ``--consensus`` leaves them out before an adjudicator looks;
- ``overlap 1``: ``--budget`` pool solutions (the same ones first), one label each: what
  the same budget buys without overlap, for context.

Figures, on the test problems (worker/evaluate.py, as active learning judges): ProcessBench
F1 (the subsets' mean) and step AUROC, each the mean over the seeds with a 95% interval
that resamples seeds and test solutions together; and the difference consensus - all with
its interval from the same draws (paired: the same seeds and the same test draws). Also,
as the simulation's own check: the share of labels, and of consensus lines, whose first
error is the true one, and the share of solutions marked for adjudication.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.consensus.rule import Status, Vote, consensus
from app.core.config import get_settings
from app.estimates import percentile_interval
from app.models import FinishReason
from bench import SHARED_DATA
from bench.active_learning_data import Data, example_of, labeled_record, load
from bench.active_learning_learner import (
    LEARNER_HEAD,
    Learner,
    Progress,
    Snapshot,
    judged,
    snapshot,
)
from bench.active_learning_ratio import estimate, joint_draws, mean_over
from bench.prm_quality_training import HEADS
from worker.eval_sets import ProcessBenchItem
from worker.pretrained import resolve_base_model
from worker.train import Example

ARMS = ("all", "consensus", "overlap 1")
FIGURES = {"f1": "ProcessBench F1", "auroc": "step AUROC"}


def noisy_first_error(item: ProcessBenchItem, error_rate: float, rng: np.random.Generator) -> int:
    """A labeler's first error (-1: none): the true one with probability 1 - error_rate,
    otherwise another choice drawn uniformly."""
    if rng.random() >= error_rate:
        return item.label
    others = [choice for choice in range(-1, len(item.steps)) if choice != item.label]
    return int(rng.choice(others))


def ratings_of(first_error: int, step_count: int) -> list[int]:
    """A phase-2 label's ratings: +1 up to the first error, -1 on it, nothing after."""
    if first_error < 0:
        return [1] * step_count
    return [1] * first_error + [-1]


def labeled_example(item: ProcessBenchItem, ratings: list[int]) -> Example:
    """The worker's training example of a label with these ratings, through a PRM800K record."""
    return example_of(labeled_record(item, ratings))


@dataclass
class Labels:
    """One seed's simulated labels, per arm: the training examples and what they hold."""

    examples: dict[str, list[Example]]
    solutions: dict[str, list[int]]
    label_accuracy: float
    consensus_accuracy: float
    marked: float
    """Share of the overlapped solutions marked for adjudication."""


def simulate(data: Data, seed: int, options: argparse.Namespace) -> Labels:
    rng = np.random.default_rng(seed)
    pool = data.pool
    rates = np.linspace(options.error_low, options.error_high, options.labelers)
    order = [int(i) for i in rng.permutation(len(pool))]
    overlapped = order[: options.budget // options.overlap]
    single = order[: options.budget]
    every: list[Example] = []
    voted: list[Example] = []
    voted_solutions: list[int] = []
    right = total = consensus_right = 0
    marked = 0
    for index in overlapped:
        item = pool[index]
        labelers = rng.choice(options.labelers, options.overlap, replace=False)
        votes = []
        for number, labeler in enumerate(labelers):
            first = noisy_first_error(item, float(rates[labeler]), rng)
            right += first == item.label
            total += 1
            ratings = ratings_of(first, len(item.steps))
            every.append(labeled_example(item, ratings))
            finish = FinishReason.FOUND_ERROR if first >= 0 else FinishReason.SOLUTION
            votes.append(Vote(number, finish.value, ratings))
        decided = consensus(votes, len(item.steps))
        if decided.status != Status.DECIDED:
            marked += 1
            continue
        ratings = list(decided.ratings)
        consensus_right += (ratings.index(-1) if -1 in ratings else -1) == item.label
        voted.append(labeled_example(item, ratings))
        voted_solutions.append(index)
    # Overlap 1: one label each, from a labeler drawn at random.
    alone = []
    for index in single:
        rate = float(rates[rng.integers(options.labelers)])
        first = noisy_first_error(pool[index], rate, rng)
        alone.append(labeled_example(pool[index], ratings_of(first, len(pool[index].steps))))
    return Labels(
        examples={"all": every, "consensus": voted, "overlap 1": alone},
        solutions={"all": overlapped, "consensus": voted_solutions, "overlap 1": single},
        label_accuracy=right / total,
        consensus_accuracy=consensus_right / max(len(voted), 1),
        marked=marked / len(overlapped),
    )


def run(
    data: Data, learner: Learner, options: argparse.Namespace, progress: Progress
) -> dict[str, Any]:
    shots: dict[str, list[Snapshot]] = {arm: [] for arm in ARMS}
    checks: list[dict[str, float]] = []
    for seed in range(options.seeds):
        labels = simulate(data, seed, options)
        checks.append(
            {
                "label_accuracy": labels.label_accuracy,
                "consensus_accuracy": labels.consensus_accuracy,
                "marked_for_adjudication": labels.marked,
                "consensus_lines": len(labels.examples["consensus"]),
            }
        )
        for arm in ARMS:
            learner.fit(labels.examples[arm])
            shot = snapshot(judged(learner, data, labels.solutions[arm], "test"), data, "test")
            shots[arm].append(shot)
            progress.line(
                f"seed {seed} {arm}: {len(labels.examples[arm])} examples, "
                f"F1 {shot.value('f1'):.3f}, AUROC {shot.value('auroc') or float('nan'):.3f}"
            )
    figures = {arm: {f: estimate(shots[arm], f) for f in FIGURES} for arm in ARMS}
    differences = {f: difference(shots["consensus"], shots["all"], f) for f in FIGURES}
    return {"figures": figures, "consensus_minus_all": differences, "checks": checks}


def difference(first: list[Snapshot], second: list[Snapshot], figure: str) -> dict[str, Any]:
    """first - second over the seeds, with a 95% interval from draws of the seeds and the
    test units made once for both (paired)."""
    a = [s.statistic(figure) for s in first]
    b = [s.statistic(figure) for s in second]
    if any(s is None for s in [*a, *b]):
        return {"status": "not enough data"}
    seeds = np.arange(len(a))
    units = np.arange(first[0].units(figure)[0])
    point = _minus(mean_over(a, seeds, units), mean_over(b, seeds, units))  # type: ignore[arg-type]
    draws = [
        _minus(mean_over(a, s, u), mean_over(b, s, u))  # type: ignore[arg-type]
        for s, u in joint_draws(first, figure)
    ]
    defined = [d for d in draws if d is not None]
    if point is None or not defined:
        return {"status": "not enough data"}
    low, high = percentile_interval(defined)
    return {"status": "ok", "value": point, "low": low, "high": high}


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def verdict(differences: dict[str, Any]) -> str:
    """BENCHMARKS.md's rule, on the primary figure (F1)."""
    f1 = differences["f1"]
    if f1["status"] != "ok":
        return "no verdict: F1 undefined"
    if f1["low"] > 0:
        return "consensus trains a better PRM (F1 interval above 0)"
    if f1["high"] < 0:
        return "consensus trains a worse PRM (F1 interval below 0)"
    return "no difference shown (F1 interval holds 0)"


def _shown(figure: dict[str, Any]) -> str:
    if figure.get("status") != "ok":
        return "—"
    return f"{figure['value']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}]"


def print_table(result: dict[str, Any]) -> None:
    print("| arm | ProcessBench F1 | step AUROC |")
    print("|---|---|---|")
    for arm in ARMS:
        row = result["figures"][arm]
        print(f"| {arm} | {_shown(row['f1'])} | {_shown(row['auroc'])} |")
    differences = result["consensus_minus_all"]
    print(f"| consensus - all | {_shown(differences['f1'])} | {_shown(differences['auroc'])} |")
    checks = result["checks"]
    for key in (
        "label_accuracy",
        "consensus_accuracy",
        "marked_for_adjudication",
        "consensus_lines",
    ):
        values = [c[key] for c in checks]
        print(
            f"\n{key}: mean {np.mean(values):.3f} (seeds {min(values):.3f} .. {max(values):.3f})",
            end="",
        )
    print(f"\n\nverdict: {result['verdict']}")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.consensus", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m or tiny")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--subsets", default="gsm8k,math")
    parser.add_argument("--per-subset", type=int, default=200)
    parser.add_argument("--budget", type=int, default=150, help="labels per arm")
    parser.add_argument("--overlap", type=int, default=3)
    parser.add_argument("--labelers", type=int, default=6)
    parser.add_argument("--error-low", type=float, default=0.1)
    parser.add_argument("--error-high", type=float, default=0.5)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--head", choices=sorted(HEADS), default=LEARNER_HEAD)
    parser.add_argument("--epochs", type=int, help="the head's training passes (a quick try)")
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args(argv)
    if options.overlap < 2 or options.labelers < options.overlap:
        parser.error("--overlap must be 2 or more, and no more than --labelers")
    # What bench/active_learning_data.py's load and ..._learner.py's Learner read.
    options.corpus = "processbench"
    options.mode = "head"
    options.device = "cpu"
    options.cache_dir = options.cache_dir or get_settings().checkpoint_dir / "feature-cache"
    options.base_model = resolve_base_model(options.model, get_settings().model_dir)
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    progress = Progress()
    data = load(options)
    if options.budget > len(data.pool):
        raise SystemExit(f"--budget exceeds the pool of {len(data.pool)} solutions")
    progress.line(
        f"pool {len(data.pool)}, calibration {len(data.split.calibration)}, "
        f"test {len(data.split.test)} solutions"
    )
    learner = Learner.load(options)
    learner.warm(data, progress)
    progress.line("features cached")
    result = run(data, learner, options, progress)
    result["verdict"] = verdict(result["consensus_minus_all"])
    result["wall_seconds"] = round(time.perf_counter() - progress.started, 1)
    result["options"] = {k: str(v) for k, v in vars(options).items()}
    result["sizes"] = {
        "pool": len(data.pool),
        "calibration": len(data.split.calibration),
        "test": len(data.split.test),
    }
    print_table(result)
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        for arm in result["figures"].values():
            for figure in arm.values():
                figure.pop("per_seed", None)
        options.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
