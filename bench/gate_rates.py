"""The gate's error rates, by simulation: how often it keeps out a PRM worse than the
current one by the margin, and how often it promotes one better by twice the margin.

    .venv/bin/python -m bench.gate_rates                     # 2,000 trials per case
    .venv/bin/python -m bench.gate_rates --trials 400 --resamples 200   # what the test runs

Each trial draws paired per-problem scores of a current and a new PRM on ``units`` held-out
problems and lets ``worker.evaluate.gate`` judge them, with their mean as the metric: step
AUROC is not a mean over problems, but behaves as one once there are more than a few (its
per-problem "placement values", DeLong et al. 1988). Each PRM's scores spread 0.32 over
problems: the spread the step AUROC interval over 675 held-out problems implies in
BENCHMARKS.md ("PRM quality": 0.737 [0.712, 0.761], a standard error of 0.0125 times
sqrt(675)). A problem's two scores correlate 0.8 (two PRMs trained on mostly the same
labels), so their difference spreads 0.2 over problems. The sizes: the demo's first run
holds out 8 problems; a real project a few hundred (300).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from worker.evaluate import RESAMPLES, Comparison, Statistic, gate

DEMO_UNITS = 8
REAL_UNITS = 300
MARGIN = 0.02
"""The default ``STEPLABEL_GATE_MARGIN``."""
SPREAD = 0.32
CORRELATION = 0.8
METRICS = ("step_auroc", "processbench_f1")


@dataclass(frozen=True)
class Case:
    name: str
    units: int
    shifts: tuple[float, ...]
    """The new PRM's true difference from the current one, per metric (the first primary)."""
    wanted: str
    """What the gate should do: "refuse" or "promote"."""


def cases(margin: float = MARGIN) -> list[Case]:
    return [
        *(
            Case(f"worse by the margin, {units} problems", units, (-margin,), "refuse")
            for units in (DEMO_UNITS, REAL_UNITS)
        ),
        Case(
            f"better by twice the margin, {REAL_UNITS} problems",
            REAL_UNITS,
            (2 * margin,),
            "promote",
        ),
        Case(
            f"better by twice the margin, but worse by the margin on a second metric, "
            f"{REAL_UNITS} problems",
            REAL_UNITS,
            (2 * margin, -margin),
            "refuse",
        ),
        Case(
            f"better by twice the margin, {DEMO_UNITS} problems",
            DEMO_UNITS,
            (2 * margin,),
            "promote",
        ),
    ]


def _mean(values: np.ndarray) -> Statistic:
    # A sum over the count: ndarray.mean's overhead was most of a simulated gate's time.
    return lambda units: float(values[units].sum()) / len(units)


def paired_scores(
    rng: np.random.Generator, units: int, shift: float, correlation: float = CORRELATION
) -> tuple[np.ndarray, ...]:
    """(current, new) per-problem scores, the new ones higher by ``shift`` on average."""
    covariance = SPREAD**2 * np.array([[1.0, correlation], [correlation, 1.0]])
    current, new = rng.multivariate_normal([0.7, 0.7 + shift], covariance, size=units).T
    return current, new


def rate(
    case: Case,
    *,
    trials: int,
    resamples: int = RESAMPLES,
    seed: int = 0,
    correlation: float = CORRELATION,
) -> float:
    """The share of trials in which the gate does what the case wants."""
    rng = np.random.default_rng(seed)
    done = 0
    for trial in range(trials):
        comparisons = []
        for metric, shift in zip(METRICS, case.shifts, strict=False):
            current, new = paired_scores(rng, case.units, shift, correlation)
            comparisons.append(Comparison(metric, _mean(new), _mean(current), case.units))
        decision = gate(
            comparisons,
            primary=METRICS[0],
            margin=MARGIN,
            has_current=True,
            seed=trial,
            resamples=resamples,
        )
        done += decision.promote == (case.wanted == "promote")
    return done / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--resamples", type=int, default=RESAMPLES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--correlation", type=float, default=CORRELATION, help="of a problem's two scores"
    )
    args = parser.parse_args()
    print(
        f"margin {MARGIN}, correlation {args.correlation}, {args.trials} trials per case, "
        f"{args.resamples} resamples"
    )
    print("| case | the gate should | it did |")
    print("|---|---|---:|")
    for case in cases():
        done = rate(
            case,
            trials=args.trials,
            resamples=args.resamples,
            seed=args.seed,
            correlation=args.correlation,
        )
        print(f"| {case.name} | {case.wanted} | {done:.1%} |")


if __name__ == "__main__":
    main()
