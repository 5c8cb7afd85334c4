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

CALIBRATION = (
    "issue 39's calibration pick (geometric mean of its eight ratios {}; not confirmed yet)"
)
SHAPE_RULE: tuple[tuple[float, int, str, str], ...] = (
    (16, 32, "convincing_wrong", CALIBRATION.format("1.54")),
    (3, 8, "random_wrong", CALIBRATION.format("3.43")),
    (0, 1, "ensemble", CALIBRATION.format("1.35")),
)
"""(from this median, measured at this many samples per problem, the strategy, where it
comes from), largest first: the picks of issue 39's pre-registered rule on its calibration
run at 32, 8 and 1 samples per problem (BENCHMARKS.md, "Issue 39"), put here before the
confirmation run, as pre-registered; each source says how far its pick is confirmed."""


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
