"""Evaluation a run records beside the held-out step metrics of worker/train.py.

- ProcessBench-style first-error F1: the PRM's first error is the first step it scores
  below the threshold (or none); F1 is the harmonic mean of its accuracy on solutions
  with an error and on solutions without one.
- Best-of-N: on problems with several graded solutions, how often the PRM's top-scored
  solution is right, beside majority voting over final answers and a random pick.
- The selection's yield: the share of selected solutions with a wrong final answer.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def first_error(labels: Sequence[int]) -> int:
    """Index of the first negative step, or -1 when there is none."""
    return next((i for i, label in enumerate(labels) if label < 0), -1)


def predicted_first_error(step_scores: Sequence[float], threshold: float = 0.5) -> int:
    return next((i for i, score in enumerate(step_scores) if score < threshold), -1)


def first_error_f1(
    labels: Sequence[Sequence[int]], step_scores: Sequence[Sequence[float]], threshold: float = 0.5
) -> dict[str, float | int | None]:
    erroneous = correct = erroneous_hits = correct_hits = 0
    for truth, scores in zip(labels, step_scores, strict=True):
        expected = first_error(truth)
        predicted = predicted_first_error(scores, threshold)
        if expected == -1:
            correct += 1
            correct_hits += predicted == -1
        else:
            erroneous += 1
            erroneous_hits += predicted == expected
    error_accuracy = erroneous_hits / erroneous if erroneous else None
    correct_accuracy = correct_hits / correct if correct else None
    f1 = None
    if error_accuracy is not None and correct_accuracy is not None:
        total = error_accuracy + correct_accuracy
        f1 = 2 * error_accuracy * correct_accuracy / total if total else 0.0
    return {
        "first_error_accuracy_erroneous": error_accuracy,
        "first_error_accuracy_correct": correct_accuracy,
        "first_error_f1": f1,
        "first_error_erroneous_count": erroneous,
        "first_error_correct_count": correct,
    }


@dataclass(frozen=True)
class GradedSolution:
    problem_id: int
    score: float
    answer: str | None
    correct: bool


def best_of_n(solutions: Iterable[GradedSolution]) -> dict[str, float | int | None]:
    """Accuracy of the PRM's pick, majority voting and a random pick, per problem."""
    by_problem: dict[int, list[GradedSolution]] = defaultdict(list)
    for solution in solutions:
        by_problem[solution.problem_id].append(solution)
    groups = [group for group in by_problem.values() if len(group) >= 2]
    if not groups:
        return {
            "best_of_n_problems": 0,
            "best_of_n_prm": None,
            "best_of_n_majority": None,
            "best_of_n_random": None,
        }
    prm = sum(max(g, key=lambda s: s.score).correct for g in groups) / len(groups)
    majority = sum(_majority_correct(g) for g in groups) / len(groups)
    # A random pick's expected accuracy, exactly, rather than one noisy draw.
    random_pick = sum(sum(s.correct for s in g) / len(g) for g in groups) / len(groups)
    return {
        "best_of_n_problems": len(groups),
        "best_of_n_mean_n": sum(len(g) for g in groups) / len(groups),
        "best_of_n_prm": prm,
        "best_of_n_majority": majority,
        "best_of_n_random": random_pick,
    }


def _majority_correct(group: list[GradedSolution]) -> bool:
    votes = Counter(s.answer for s in group if s.answer is not None)
    if not votes:
        return False
    answer, _ = votes.most_common(1)[0]
    return next(s.correct for s in group if s.answer == answer)


def selection_yield(selected_correctness: Sequence[bool | None]) -> float | None:
    """Share of the selected solutions whose final answer was graded wrong."""
    graded = [c for c in selected_correctness if c is not None]
    return sum(not c for c in graded) / len(graded) if graded else None
