"""Active learning, measured: does labeling convincing wrong answers buy more PRM per label?

    .venv/bin/python -m bench.active_learning --json test-artifacts/active_learning.json
    .venv/bin/python -m bench.active_learning --wrong-share 0.5   # or --batch 0, --per-problem 2
    .venv/bin/python -m bench.active_learning --model tiny --per-subset 15 --seed-size 6 \\
        --budgets 10,14 --batch 3 --seeds 2 --cache-dir /tmp/tiny-features   # seconds

From an empty feature cache the first prints its table in about 37 minutes on 2 cores of
an AMD EPYC without AMX, 19 of them SmolLM2's features (cached: later runs take about 18);
BENCHMARKS.md, issue 24.

The data: ProcessBench (../shared/data, or ``--data``), split by problem exactly as
bench/prm_quality.py splits it (its ``split``, seed 0): its training problems are the pool
that strategies pick from, its calibration problems choose the first-error threshold, and
its test problems (half of all) are only ever judged on: never labeled, never used to
choose anything. So the SmolLM2 step features that bench cached cover every solution here.
By default only the gsm8k and math subsets (1,400 of the 3,400 solutions: a pool of 538,
150 calibration, 712 test), the ones it caches: the other two hold 1.9M more tokens, about
50 minutes of SmolLM2 on that CPU before the first round (``--subsets`` takes all four;
``python -m bench.features`` caches them ahead).

The labelers are simulated: a solution picked for labeling reveals its expert labels,
written as the PRM800K record a labeler would produce (a rated completion per step, the
path ending at the first error) and turned into its training example by the worker's own
``examples_from_record`` (worker/data.py), checked against the item's labels.

Each seed (``--seeds``, default 10; a seed changes the uniform seed set and the random
strategies' draws, never the split nor the head's initialization): ``--seed-size`` (50)
pool solutions chosen uniformly are labeled and the PRM trained on them (worker/train.py
``fit`` in ``head`` mode: SmolLM2-135M's frozen features from the shared feature cache, a
linear head retrained from scratch on every label so far; with ``--mode full`` or
``lora``, the whole PRM fine-tuned from its pretrained weights on every label so far, as
the paper retrained, on a GPU where there is one, ``--device``; the mode and device are
recorded with the figures). Then, in rounds, the PRM scores
the unlabeled pool (worker/score.py ``step_probabilities``, ``solution_score``;
``first_error_entropy``), the strategy picks the next solutions with worker/select.py
``select``, they are labeled and the PRM is retrained. A round labels ``--batch`` (50)
solutions, fewer where that would step over the next of ``--budgets`` (100, 200, 400:
cumulative labels, the seed set included), so that every strategy is judged at exactly
each budget; ``--batch 0`` goes to the next budget in one round. The batch is one
``SelectionPlan`` over the whole pool (``global_top_k``: nearly every pool problem has a
single solution, so picking K per problem would mean picking problems), or with
``--per-problem K``, K per problem, problems taken in the strategy's order up to the batch
(``max_size``). The strategies are worker/select.py's: ``uniform``; ``convincing_wrong``
(``--wrong-share`` of the batch the highest-scored solutions whose final answer is wrong,
the rest the highest-scored others); ``random_wrong`` (the same share of wrong answers, at
random); ``uncertain`` (the largest entropy of the first-error prediction); and the
uncertainty and diversity rules the module lists (``STRATEGIES``).

Seeds run side by side in ``--workers`` processes, by default one per CPU core in ``head``
mode: a round's head is too small to share two threads (the rounds run on one), so a
second core would otherwise sit idle. A seed's runs depend on the seed alone, so the
figures are the same with any number of workers; only the wall time changes. For the same
reason a long run can be stopped and go on: with ``--resume FOLDER`` each finished seed is
kept there (bench/seed_store.py), and the same command started again runs only the seeds
it had not finished (other options in the same folder are refused).

Figures at each budget, on the test problems (worker/evaluate.py): ProcessBench F1 (the
subsets' mean; threshold chosen on the calibration problems) and step AUROC (P(-1) of the
labeled steps), each the mean over the seeds with a 95% bootstrap interval (test solutions
resampled within subsets for F1, test problems for AUROC; every seed's model judged on the
same draws) and the standard deviation over the seeds; negatives found per label (share
of the labeled solutions, seed set included, that contain an error, so carry a -1 step);
the seconds each strategy spent selecting, training and scoring the pool.

The headline, the data-efficiency ratio: how many labels uniform needs to reach a
strategy's figure at a budget, divided by that budget, reading uniform's mean curve
(the seed set and the budgets) linearly in log(labels) at its first crossing. Above 1 the
strategy buys more per label. Past the curve's end it is "beyond the largest budget" (and
at least largest / budget); uniform's own ratio is 1 by definition. Its interval comes from
the same test draws, its spread from the ratio of each seed against that seed's uniform.

bon32 (``--corpus bon32``, bench/bon32.py; BENCHMARKS.md, issue 39): the paper's regime,
32 sampled solutions per problem labeled by a simulated labeler that reads Qwen2.5-Math-PRM-7B's
step scores, ProcessBench's test problems left out. One half of its problems (``--half``:
``calibration`` to choose on, ``confirmation`` run once, the default) is a pool of
``--problems`` (64) problems at each of ``--samples`` (1, 8, 32) solutions per problem, one
run each, plus 16 held-out problems (8 solutions each) judged by the simulated labeler
beside ProcessBench. The seed set is one solution of each of ``--seed-size`` (16) problems,
rounds take ``--per-problem`` (2) per problem straight to each of ``--budgets`` (32, 48),
and every strategy but uniform runs with each of ``--selectors``: ``retrain`` (the PRM
retrained on every label picks each round) and ``fixed`` (the paper's: the seed set's PRM
scores the pool once and every round picks by that scoring). Its output: per N the tables,
a JSON file whose rows carry ``samples``, ``selector`` and ``primary: true`` at 32 and 48
labels with 32 samples, the rule's picks per N, the worker's ``default_strategy`` for such a
pool (app/pool_shape.py), and an SVG of each arm's ratio against samples per problem.

    nice -n 19 .venv/bin/python -m bench.active_learning --corpus bon32 --json PATH

Output: a markdown table on stdout, progress (one line per round) on stderr, an SVG of
both figures against labels (``--plot``, by default test-artifacts/active_learning.svg,
outside git) and, with ``--json``, every figure and each run's labeled solutions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.core.config import STRATEGIES, Strategy, get_settings
from app.pool_shape import strategy_for_pool
from bench import SHARED_DATA
from bench.active_learning_data import (
    BON32_HELD_OUT_PROBLEMS,
    BON32_PROBLEMS,
    DEFAULT_SUBSETS,
    Data,
    load,
)
from bench.active_learning_learner import LEARNER_HEAD, Progress
from bench.active_learning_plot import svg_plot, svg_ratio_by_samples
from bench.active_learning_ratio import SEED_ROW, WHOLE_POOL_ROW, summarize
from bench.active_learning_report import (
    BON32_CHOICE_FIGURES,
    BON32_PRIMARY_BUDGETS,
    BON32_PRIMARY_SAMPLES,
    PRIMARY_BUDGETS,
    PRIMARY_FIGURES,
    primary_figure,
    print_table,
    rule_pick,
    to_json,
)
from bench.active_learning_rounds import REFERENCE, Run, Schedule, compare
from bench.bon32 import BON32, HALVES, SAMPLES
from bench.prm_quality_training import HEADS
from bench.prmbench import SUBSET as PRMBENCH
from worker.eval_sets import PROCESSBENCH_SUBSETS
from worker.pretrained import resolve_base_model
from worker.select import SelectionPlan

DEFAULT_PLOT = Path("test-artifacts") / "active_learning.svg"
BON32_SAMPLES = (1, 8, 32)
BON32_SEED_SIZE, BON32_BUDGETS, BON32_PER_PROBLEM = 16, "32,48", 2
BON32_STRATEGIES: tuple[Strategy, ...] = (
    "uniform",
    "convincing_wrong",
    "random_wrong",
    "uncertain",
    "ensemble",
)
"""The pre-registered five of issue 39: the reference, the paper's rule, its shape at random,
and the two uncertainty rules that did best in issue 24; each in both selectors."""
SELECTORS = ("retrain", "fixed")
"""How the selector is made: ``retrain``, the PRM retrained on every label so far picks
each round (this bench's loop); ``fixed``, the paper's (section 4.2): the PRM trained once
on the seed set scores the pool once, and every round picks by that one scoring."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.active_learning", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m or tiny")
    parser.add_argument(
        "--mode",
        choices=("head", "full", "lora"),
        default="head",
        help="head: the CPU default; full: fine-tune the whole PRM each round (a GPU's)",
    )
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument(
        "--epochs",
        type=int,
        help="training passes each round (default: the model's and mode's, "
        "worker/training_args.py); fewer only to try the bench out, never for figures",
    )
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument(
        "--corpus",
        choices=("processbench", PRMBENCH, BON32),
        default="processbench",
        help="prmbench: the paper's regime, up to 9 labeled solutions per problem; bon32: "
        "32 sampled solutions per problem, labeled by the 7B PRM's simulated labeler",
    )
    parser.add_argument(
        "--half",
        choices=HALVES,
        default=HALVES[1],
        help="bon32: the half of its problems to run on (calibration: to choose on)",
    )
    parser.add_argument(
        "--samples",
        default=",".join(map(str, BON32_SAMPLES)),
        help="bon32: samples per problem in the pool, one run each (the first N of the 32)",
    )
    parser.add_argument(
        "--problems",
        type=int,
        default=BON32_PROBLEMS,
        help=f"bon32: pool problems (and {BON32_HELD_OUT_PROBLEMS} held out); 0: the whole "
        "half (a GPU's job)",
    )
    parser.add_argument(
        "--selectors",
        help=f"{', '.join(SELECTORS)} (default: both on bon32, retrain elsewhere)",
    )
    parser.add_argument(
        "--subsets", default=",".join(DEFAULT_SUBSETS), help=", ".join(PROCESSBENCH_SUBSETS)
    )
    parser.add_argument(
        "--per-subset",
        type=int,
        help="a fixed sample of each subset (PRMBench: of its trajectories)",
    )
    parser.add_argument(
        "--judge",
        choices=("test", "calibration"),
        default="test",
        help="calibration: judge on the calibration problems, to choose by; never reads a "
        "test problem",
    )
    parser.add_argument(
        "--head",
        choices=sorted(HEADS),
        default=LEARNER_HEAD,
        help="a head of bench/prm_quality.py (default: five linear members on every reading)",
    )
    parser.add_argument(
        "--strategies",
        help=f"default: every one; bon32: {','.join(BON32_STRATEGIES)} (BENCHMARKS.md, issue 39)",
    )
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0 .. N-1")
    parser.add_argument(
        "--workers",
        type=int,
        help="seeds run side by side in this many processes (default: in head mode one per "
        "CPU core, at most one per seed; otherwise 1, in this process)",
    )
    parser.add_argument(
        "--seed-size",
        type=int,
        help="the uniform seed set (default 50; bon32: one solution of each of 16 problems)",
    )
    parser.add_argument("--budgets", help="cumulative labels (default 100,200,400; bon32: 32,48)")
    parser.add_argument(
        "--batch", type=int, help="labels per round, 0: to the budget (default 50; bon32: 0)"
    )
    parser.add_argument(
        "--per-problem", type=int, help="K per problem per round, 0: global (bon32: 2)"
    )
    parser.add_argument("--wrong-share", type=float, default=SelectionPlan.wrong_share)
    parser.add_argument("--cache-dir", type=Path, help="default: <checkpoint_dir>/feature-cache")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument(
        "--resume",
        type=Path,
        help="keep each finished seed in this folder, and take the seeds a stopped run with "
        "the same options left there",
    )
    options = parser.parse_args(argv)
    bon32 = options.corpus == BON32
    defaults = (
        (BON32_SEED_SIZE, BON32_BUDGETS, 0, BON32_PER_PROBLEM)
        if bon32
        else (50, "100,200,400", 50, 0)
    )
    for name, default in zip(
        ("seed_size", "budgets", "batch", "per_problem"), defaults, strict=True
    ):
        if getattr(options, name) is None:
            setattr(options, name, default)
    options.selectors = (
        options.selectors or ",".join(SELECTORS if bon32 else SELECTORS[:1])
    ).split(",")
    if not options.selectors or not set(options.selectors) <= set(SELECTORS):
        parser.error(f"selectors from {', '.join(SELECTORS)}")
    options.samples = [int(n) for n in str(options.samples).split(",")] if bon32 else [0]
    if any(n < 1 or n > SAMPLES for n in options.samples) and bon32:
        parser.error(f"--samples: between 1 and {SAMPLES}")
    strategies = (options.strategies or ",".join(BON32_STRATEGIES if bon32 else STRATEGIES)).split(
        ","
    )
    if REFERENCE not in strategies or not set(strategies) <= set(STRATEGIES):
        parser.error(f"strategies from {', '.join(STRATEGIES)}, {REFERENCE} among them")
    options.strategies = [REFERENCE, *(s for s in strategies if s != REFERENCE)]
    budgets = tuple(sorted(int(b) for b in options.budgets.split(",")))
    if budgets[0] <= options.seed_size or options.seed_size < 1:
        parser.error("the budgets must exceed the seed set, which must not be empty")
    options.schedule = Schedule(options.seed_size, budgets, options.batch or None)
    if options.workers is None:
        cores = os.cpu_count() or 1
        options.workers = min(cores, options.seeds) if options.mode == "head" else 1
    if options.workers < 1:
        parser.error("--workers must be at least 1")
    options.cache_dir = options.cache_dir or get_settings().checkpoint_dir / "feature-cache"
    options.base_model = resolve_base_model(options.model, get_settings().model_dir)
    return options


def run_once(options: argparse.Namespace, progress: Progress) -> tuple[dict[str, Any], Data]:
    """Every arm from every seed on one corpus (for bon32, at one ``samples`` per problem):
    the rows, the primary figure, the compute."""
    data = load(options)
    if options.schedule.budgets[-1] > len(data.pool):
        raise SystemExit(f"the largest budget exceeds the pool of {len(data.pool)} solutions")
    progress.line(
        f"{options.corpus}: pool {len(data.pool)}, calibration {len(data.split.calibration)}, "
        f"test {len(data.split.test)}, held-out pool {len(data.held_out)} solutions"
    )
    result = compare(data, options, progress)
    runs: dict[str, list[Run]] = result["runs"]
    rows = summarize(runs, options.schedule, result.pop("whole_pool"))
    bon32 = options.corpus == BON32
    budgets = BON32_PRIMARY_BUDGETS if bon32 else PRIMARY_BUDGETS
    read = BON32_CHOICE_FIGURES if bon32 else PRIMARY_FIGURES
    result["primary"] = primary_figure(rows, budgets, read)
    result["budgets_read"] = [f"{f}@{b}" for b in budgets for f in read]
    primary = not bon32 or options.samples == BON32_PRIMARY_SAMPLES
    result["rows"] = [annotated(row, budgets if primary else (), options) for row in rows]
    result["compute"] = {
        s: {"seconds": sum(r.seconds for r in rs), "rounds": sum(r.rounds for r in rs)}
        for s, rs in runs.items()
    }
    return result, data


def annotated(
    row: dict[str, Any], primary_budgets: Sequence[int], options: argparse.Namespace
) -> dict[str, Any]:
    """A summary row with its strategy and selector apart (bon32: and its samples per
    problem), and ``primary: true`` at the pre-registered primary budgets."""
    arm = row["strategy"]
    strategy, fixed = arm.removesuffix(", fixed"), arm.endswith(", fixed")
    extra: dict[str, Any] = {}
    if options.corpus == BON32:
        extra["samples"] = options.samples
    if arm not in (SEED_ROW, WHOLE_POOL_ROW):
        extra["selector"] = "fixed" if fixed else ("none" if arm == REFERENCE else "retrain")
        extra["arm"] = arm
    if arm not in (SEED_ROW, WHOLE_POOL_ROW) and row["labels"] in primary_budgets:
        extra["primary"] = True
    return {**row, "strategy": strategy, **extra}


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    progress = Progress()
    if options.corpus != BON32:
        result, data = run_once(options, progress)
        result["wall_seconds"] = round(time.perf_counter() - progress.started, 1)
        progress.line(f"done in {result['wall_seconds']} s")
        print_table(result)
        options.plot.parent.mkdir(parents=True, exist_ok=True)
        options.plot.write_text(svg_plot(result["rows"], options.schedule.sizes))
        if options.json:
            options.json.write_text(json.dumps(to_json(result, data), indent=2) + "\n")
        return 0
    results = []
    for samples in options.samples:
        at = argparse.Namespace(**{**vars(options), "samples": samples})
        if options.resume:
            at.resume = options.resume / f"samples-{samples}"
        result, data = run_once(at, progress)
        print(f"## {samples} samples per problem\n")
        print_table(result)
        results.append({"samples": samples, **to_json(result, data)})
    choice = strategy_for_pool([max(options.samples)] * (options.problems or 1))
    combined = {
        "corpus": BON32,
        "half": options.half,
        "judged_on": options.judge,
        "default_strategy": choice.strategy,
        "default_rule": choice.reason,
        "picks": {r["samples"]: rule_pick(r["primary"], retrained_only=True) for r in results},
        "picks_any_selector": {r["samples"]: rule_pick(r["primary"]) for r in results},
        "rows": [row for r in results for row in r["rows"]],
        "by_samples": results,
        "wall_seconds": round(time.perf_counter() - progress.started, 1),
    }
    progress.line(f"done in {combined['wall_seconds']} s")
    options.plot.parent.mkdir(parents=True, exist_ok=True)
    options.plot.write_text(svg_ratio_by_samples(combined["rows"]))
    if options.json:
        options.json.write_text(json.dumps(combined, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
