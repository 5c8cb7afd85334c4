"""The worker's default selection strategy: a rule of the pool's shape (issue 39).

How much selection can buy depends on how many unlabeled solutions each problem has to
choose among: with one there is nothing to choose within a problem, with dozens the paper
found its gains. bench/active_learning.py ``--corpus bon32`` measures every strategy at 1, 8
and 32 samples per problem, and BENCHMARKS.md (issue 39) says which one its pre-registered
rule picked at each; this table holds those picks. A pool is read by the median number of
unlabeled, unqueued solutions per problem, and takes the pick measured at the nearest of
1, 8 and 32 samples per problem (nearest in log scale: the boundaries are 3 and 16).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BY_POOL_SHAPE = "by_pool_shape"
"""``STEPLABEL_SELECT_STRATEGY``'s value that asks for this rule (the default)."""

SHAPE_RULE: tuple[tuple[float, int, str, str], ...] = (
    (
        16,
        32,
        "convincing_wrong",
        "issue 39's calibration pick (geometric mean of its eight ratios 1.54), above uniform "
        "again on the confirmation half (4.25) but not confirmed: no interval excludes "
        "uniform and the target of half the labels was missed",
    ),
    (
        3,
        8,
        "random_wrong",
        "issue 39's calibration pick (geometric mean of its eight ratios 3.43), above uniform "
        "again on the confirmation half (1.53) but not confirmed: no interval excludes uniform",
    ),
    (
        0,
        1,
        "uniform",
        "issue 39's calibration picked ensemble (1.35), which fell to uniform's level on the "
        "confirmation half (0.99), as in issue 24's confirmations: no rule beats a uniform pick",
    ),
)
"""(from this median, measured at this many samples per problem, the strategy, where it
comes from), largest first. Issue 39's pre-registered rule picked an arm per N on its
calibration half; these rows went in before the confirmation run. The confirmation (run
once, BENCHMARKS.md "Issue 39: the confirmation") kept a pick where the same eight ratios'
geometric mean stayed above 1 and put uniform back where it did not. No pick is confirmed in
the strict sense: every interval reaches below 1, so the sources say so."""


@dataclass(frozen=True)
class ShapeChoice:
    strategy: str
    median: float
    """Median unlabeled solutions per problem (0 for an empty pool)."""
    measured_at: int
    """The samples per problem of the benchmark's figure the pick is for."""
    source: str
    """Where the pick comes from, as BENCHMARKS.md names it."""

    @property
    def reason(self) -> str:
        """What the PRM page says: the pool's shape, the pick, and where it comes from."""
        per = "sample" if self.median == 1 else "samples"
        return (
            f"your pool has {self.median:g} unlabeled {per} per problem (median), the shape "
            f"of {self.measured_at} per problem in BENCHMARKS.md: {self.strategy}, "
            f"{self.source}"
        )


def chosen_strategy(setting: str, per_problem: Sequence[float]) -> tuple[str, ShapeChoice | None]:
    """The strategy a selection uses under ``select_strategy`` = ``setting``, for a pool with
    ``per_problem`` unlabeled solutions on each problem; with the rule, its choice, to say
    why."""
    if setting != BY_POOL_SHAPE:
        return setting, None
    choice = strategy_for_pool(per_problem)
    return choice.strategy, choice


def per_problem(problem_ids: Iterable[int]) -> list[int]:
    """How many of the pool's solutions (one problem id each) each problem has."""
    return list(Counter(problem_ids).values())


def strategy_for_pool(per_problem: Sequence[float]) -> ShapeChoice:
    """The strategy for a pool with ``per_problem`` unlabeled solutions on each problem."""
    median = float(statistics.median(per_problem)) if per_problem else 0.0
    for lowest, measured_at, strategy, source in SHAPE_RULE:
        if median >= lowest:
            return ShapeChoice(strategy, median, measured_at, source)
    raise AssertionError("the rule's last row starts at 0")
