"""What bench/prm_quality.py reports of a trained model: its figures on the judged problems
(pooled over training seeds, with intervals that hold the seeds' spread) and the table."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.estimates import RESAMPLES, percentile_interval, resample, split_units
from bench.prm_quality_data import PHASE1_TEST, Split, examples
from bench.prm_quality_training import Trained
from bench.prm_thresholds import decide, describe_rule, threshold_figures
from worker import evaluate
from worker.assess import by_subset, first_errors, step_set
from worker.evaluate import Estimate, FirstErrors, Statistic, StepSet
from worker.train import Example


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
