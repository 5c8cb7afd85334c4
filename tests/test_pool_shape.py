"""app/pool_shape.py: the worker's default strategy read from the pool's shape."""

import pytest

from app.pool_shape import (
    BY_POOL_SHAPE,
    SHAPE_RULE,
    chosen_strategy,
    per_problem,
    strategy_for_pool,
)


def pick_at(samples: int) -> str:
    """The table's pick measured at ``samples`` per problem."""
    return next(strategy for _, measured, strategy, _ in SHAPE_RULE if measured == samples)


def test_the_rule_keeps_the_picks_the_confirmation_left_above_uniform() -> None:
    # BENCHMARKS.md, issue 39: the calibration's picks at 32 and 8 samples per problem stayed
    # above uniform on the confirmation half; the pick at 1 (ensemble) did not, so uniform.
    assert [(low, n, strategy) for low, n, strategy, _ in SHAPE_RULE] == [
        (16, 32, "convincing_wrong"),
        (3, 8, "random_wrong"),
        (0, 1, "uniform"),
    ]
    assert all(source.startswith("issue 39's calibration pick") for *_, source in SHAPE_RULE)
    assert all("confirm" in source for *_, source in SHAPE_RULE)


def test_a_pool_of_one_sample_per_problem_takes_the_pick_measured_at_one() -> None:
    choice = strategy_for_pool([1] * 40)
    assert (choice.strategy, choice.median, choice.measured_at) == (pick_at(1), 1.0, 1)
    assert choice.reason.startswith("your pool has 1 unlabeled sample per problem (median), ")


def test_a_pool_of_32_samples_per_problem_takes_the_pick_measured_at_32() -> None:
    choice = strategy_for_pool([32] * 10 + [3])
    assert (choice.strategy, choice.median, choice.measured_at) == (pick_at(32), 32.0, 32)
    assert "your pool has 32 unlabeled samples per problem (median)" in choice.reason
    assert "the shape of 32 per problem in BENCHMARKS.md: " in choice.reason
    assert choice.reason.endswith(f": {pick_at(32)}, {choice.source}")


@pytest.mark.parametrize(
    ("shape", "measured_at"),
    [([2, 2, 3], 1), ([3], 8), ([8, 8], 8), ([15, 16], 8), ([16], 32), ([], 1)],
)
def test_the_boundaries_lie_at_3_and_16_samples(shape: list[int], measured_at: int) -> None:
    assert strategy_for_pool(shape).measured_at == measured_at


def test_a_strategy_set_by_name_is_used_as_it_is() -> None:
    assert chosen_strategy("uniform", [32, 32]) == ("uniform", None)
    strategy, choice = chosen_strategy(BY_POOL_SHAPE, per_problem([7, 7, 9, 7]))
    assert choice is not None and choice.median == 2.0 and strategy == pick_at(1)
