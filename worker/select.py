"""Active learning: choose the convincing wrong-answer solutions humans should label next.

As in "Let's Verify Step by Step" (section 4.2): per problem, rank the unlabeled solutions
by the current PRM's score and take K, mostly the highest-scored solutions whose final
answer is wrong (the PRM is fooled by them, so their labels teach it the most), and the
rest the highest-scored of the others.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    solution_id: int
    problem_id: int
    score: float
    answer_correct: bool | None
    """The graded final answer; None where it could not be graded."""


def select_convincing(
    candidates: Iterable[Candidate],
    per_problem: int,
    wrong_share: float = 0.8,
    global_top_k: int | None = None,
) -> list[int]:
    """Solution ids to queue, most convincing first within each problem.

    ``per_problem`` solutions of each problem, ``wrong_share`` of them convincing wrong
    answers (fewer when a problem has fewer; the rest make up the difference). With
    ``global_top_k``, the same split over the whole pool instead of per problem.
    """
    if global_top_k is not None:
        return _take(list(candidates), global_top_k, wrong_share)
    by_problem: dict[int, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        by_problem[candidate.problem_id].append(candidate)
    chosen: list[int] = []
    for problem_id in sorted(by_problem):
        chosen.extend(_take(by_problem[problem_id], per_problem, wrong_share))
    return chosen


def _take(pool: list[Candidate], k: int, wrong_share: float) -> list[int]:
    # Ties in score go to the older solution, so selections are reproducible.
    ranked = sorted(pool, key=lambda c: (-c.score, c.solution_id))
    wrong = [c for c in ranked if c.answer_correct is False]
    taken = wrong[: round(k * wrong_share)]
    picked = {c.solution_id for c in taken}
    rest = [c for c in ranked if c.solution_id not in picked]
    taken += rest[: k - len(taken)]
    return [c.solution_id for c in sorted(taken, key=lambda c: (-c.score, c.solution_id))]
