"""Selection on fixed scores and gradings picks exactly the expected solutions."""

import math
import random
from typing import Any

import pytest

from worker.select import (
    STRATEGIES,
    Candidate,
    SelectionPlan,
    first_error_entropy,
    select,
    wrong_quotas,
)


def select_convincing(pool: list[Candidate], **plan: Any) -> list[int]:
    return select(pool, SelectionPlan(**plan))


def pool() -> list[Candidate]:
    # problem 1: wrong answers scored 0.9, 0.7, 0.2; right answers 0.95, 0.5; one ungraded
    # problem 2: only right answers
    return [
        Candidate(1, 1, 0.9, False),
        Candidate(2, 1, 0.95, True),
        Candidate(3, 1, 0.7, False),
        Candidate(4, 1, 0.2, False),
        Candidate(5, 1, 0.5, True),
        Candidate(6, 1, 0.99, None),
        Candidate(7, 2, 0.4, True),
        Candidate(8, 2, 0.8, True),
        Candidate(9, 2, 0.6, True),
    ]


def test_per_problem_takes_convincing_wrong_answers_then_the_best_of_the_rest() -> None:
    # K=5 with 80% wrong: 4 wrong wanted, problem 1 has 3 (1, 3, 4), then the best of
    # the rest (6 at 0.99, then 2 at 0.95) fill the last 2; problem 2 has no wrong answers.
    chosen = select_convincing(pool(), per_problem=5, wrong_share=0.8)
    assert chosen == [6, 2, 1, 3, 4, 8, 9, 7]


def test_the_share_holds_for_the_whole_selection() -> None:
    # K=2 at 50%: 2 of 4 wrong. Problem 2 has none, so problem 1 gives both (1 and 3).
    assert select_convincing(pool(), per_problem=2, wrong_share=0.5) == [1, 3, 8, 9]


def test_all_wrong_share_picks_only_wrong_when_there_are_enough() -> None:
    assert select_convincing(pool(), per_problem=2, wrong_share=1.0) == [1, 3, 8, 9]


def test_global_top_k_ignores_problems() -> None:
    assert select_convincing(pool(), per_problem=99, wrong_share=0.75, global_top_k=4) == [
        6,
        1,
        3,
        4,
    ]


def test_ties_go_to_the_older_solution() -> None:
    tied = [Candidate(12, 1, 0.5, False), Candidate(11, 1, 0.5, False)]
    assert select_convincing(tied, per_problem=1) == [11]


def test_empty_pool() -> None:
    assert select_convincing([], per_problem=4) == []


def _problems(count: int, per_problem: int, seed: int) -> list[Candidate]:
    rng = random.Random(seed)
    return [
        Candidate(p * 100 + i, p, rng.random(), rng.random() < 0.5)
        for p in range(count)
        for i in range(per_problem)
    ]


@pytest.mark.parametrize("seed", range(5))
def test_four_per_problem_over_25_problems_queues_exactly_80_wrong_of_100(seed: int) -> None:
    """Rounding per problem gave 3 of 4 (75%); the largest remainder gives 80% exactly."""
    candidates = _problems(25, 12, seed)  # 12 each, about 6 wrong: room for 4 wrong anywhere
    correctness = {c.solution_id: c.answer_correct for c in candidates}

    chosen = select(candidates, SelectionPlan(per_problem=4, wrong_share=0.8))

    assert len(chosen) == len(set(chosen)) == 100
    assert sum(correctness[i] is False for i in chosen) == 80


def test_quotas_never_exceed_what_a_problem_has() -> None:
    assert wrong_quotas([4, 4, 4], [4, 1, 0], 0.8) == [4, 1, 0]
    assert wrong_quotas([4] * 5, [4] * 5, 0.8) == [4, 3, 3, 3, 3]
    # A problem of wrong answers only gives them all, the others give fewer to keep 80%.
    assert wrong_quotas([4, 4, 4, 4, 4], [4] * 5, 0.8, floors=[4, 4, 0, 0, 0]) == [4, 4, 3, 3, 2]
    assert sum(wrong_quotas([3] * 7, [3] * 7, 0.8)) == math.floor(21 * 0.8 + 0.5)


def test_the_size_cap_takes_whole_problems_most_convincing_first() -> None:
    candidates = _problems(10, 6, seed=1)
    best = {p: max(c.score for c in candidates if c.problem_id == p) for p in range(10)}

    chosen = select(candidates, SelectionPlan(per_problem=4, max_size=10))

    assert len(chosen) == 10
    problems = list(dict.fromkeys(i // 100 for i in chosen))
    assert problems == sorted(best, key=lambda p: -best[p])[:3]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_queues_k_per_problem_reproducibly(strategy: Any) -> None:
    candidates = _problems(8, 7, seed=2)
    plan = SelectionPlan(strategy=strategy, per_problem=3, seed=5)

    chosen = select(candidates, plan)

    assert len(chosen) == len(set(chosen)) == 24
    assert all(sum(i // 100 == p for i in chosen) == 3 for p in range(8))
    assert select(candidates, plan) == chosen


def test_random_wrong_keeps_the_share_but_not_the_ranking() -> None:
    candidates = _problems(25, 12, seed=3)
    correctness = {c.solution_id: c.answer_correct for c in candidates}
    plans = {s: SelectionPlan(strategy=s, per_problem=4, seed=0) for s in STRATEGIES}

    convincing = select(candidates, plans["convincing_wrong"])
    random_wrong = select(candidates, plans["random_wrong"])

    assert sum(correctness[i] is False for i in random_wrong) == 80
    scores = {c.solution_id: c.score for c in candidates}
    mean = lambda ids: sum(scores[i] for i in ids) / len(ids)  # noqa: E731
    assert mean(convincing) > mean(random_wrong) + 0.1


def test_uncertain_takes_the_highest_first_error_entropy() -> None:
    candidates = [
        Candidate(1, 1, 0.5, None, uncertainty=0.1),
        Candidate(2, 1, 0.5, None, uncertainty=0.9),
        Candidate(3, 1, 0.5, None, uncertainty=0.5),
    ]
    assert select(candidates, SelectionPlan(strategy="uncertain", per_problem=2)) == [2, 3]


def test_first_error_entropy() -> None:
    # Sure every step is fine, or sure step 1 is the error: no uncertainty.
    assert first_error_entropy([1.0, 1.0]) == 0.0
    assert first_error_entropy([1.0, 0.0]) == 0.0
    # P(error at 0) = 0.5, P(none) = 0.5: one bit.
    assert first_error_entropy([0.5]) == pytest.approx(math.log(2))
    # Three outcomes of a third each: the most uncertain a two-step solution can be.
    assert first_error_entropy([2 / 3, 0.5]) == pytest.approx(math.log(3))
