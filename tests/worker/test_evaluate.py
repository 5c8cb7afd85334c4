"""The run metrics on fixed inputs, worked out by hand."""

import pytest

from worker.evaluate import (
    GradedSolution,
    best_of_n,
    first_error,
    first_error_f1,
    predicted_first_error,
    selection_yield,
)


def test_first_error_positions() -> None:
    assert first_error([1, 0, -1, 1]) == 2
    assert first_error([1, 1]) == -1
    assert predicted_first_error([0.9, 0.4, 0.1]) == 1
    assert predicted_first_error([0.9, 0.6]) == -1


def test_first_error_f1_is_the_harmonic_mean() -> None:
    labels = [[1, -1], [1, 1, -1], [1, 1], [1, 0, 1]]
    scores = [[0.9, 0.2], [0.3, 0.9, 0.9], [0.9, 0.8], [0.9, 0.4, 0.9]]
    metrics = first_error_f1(labels, scores)
    # erroneous: first right (1), second wrong (predicted 0) -> 0.5
    # correct: first right (-1), second wrong (predicted 1) -> 0.5
    assert metrics["first_error_accuracy_erroneous"] == 0.5
    assert metrics["first_error_accuracy_correct"] == 0.5
    assert metrics["first_error_f1"] == pytest.approx(0.5)
    assert metrics["first_error_erroneous_count"] == 2


def test_first_error_f1_without_one_kind_is_undefined() -> None:
    assert first_error_f1([[1, 1]], [[0.9, 0.9]])["first_error_f1"] is None


def test_best_of_n_against_majority_and_random() -> None:
    solutions = [
        # problem 1: PRM picks the right one, the majority is wrong
        GradedSolution(1, 0.9, "5", True),
        GradedSolution(1, 0.2, "4", False),
        GradedSolution(1, 0.3, "4", False),
        # problem 2: PRM picks a wrong one, the majority is right
        GradedSolution(2, 0.9, "7", False),
        GradedSolution(2, 0.5, "8", True),
        GradedSolution(2, 0.4, "8", True),
        # problem 3: a single solution does not count
        GradedSolution(3, 0.9, "1", True),
    ]
    metrics = best_of_n(solutions)
    assert metrics["best_of_n_problems"] == 2
    assert metrics["best_of_n_prm"] == 0.5
    assert metrics["best_of_n_majority"] == 0.5
    assert metrics["best_of_n_random"] == pytest.approx((1 / 3 + 2 / 3) / 2)


def test_selection_yield() -> None:
    assert selection_yield([False, False, True, None]) == pytest.approx(2 / 3)
    assert selection_yield([None]) is None
