"""Selection on fixed scores and gradings picks exactly the expected solutions."""

import math
import random
from typing import Any

import numpy as np
import pytest

from worker.select import (
    STRATEGIES,
    Candidate,
    SelectionPlan,
    Uncertainty,
    first_error_entropy,
    select,
    uncertainty_of,
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


def test_the_rest_is_the_most_convincing_of_any_answer() -> None:
    # K=2 at 50%: one wrong answer (1 at 0.9), then the best of what remains, whatever its
    # answer: the ungraded 6 at 0.99. Problem 2 has no wrong answers: its best two.
    assert select_convincing(pool(), per_problem=2, wrong_share=0.5) == [6, 1, 8, 9]
    # Where the best of what remains is a wrong answer, it is taken: 2 of 2 wrong here.
    wrong_best = [Candidate(1, 1, 0.9, False), Candidate(2, 1, 0.8, False)]
    wrong_best.append(Candidate(3, 1, 0.5, True))
    assert select_convincing(wrong_best, per_problem=2, wrong_share=0.5) == [1, 2]


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
def test_each_problem_gives_its_share_of_wrong_answers_then_the_best_of_the_rest(
    seed: int,
) -> None:
    candidates = _problems(25, 12, seed)  # 12 each, about 6 wrong: room for 3 wrong anywhere

    chosen = set(select(candidates, SelectionPlan(per_problem=4, wrong_share=0.8)))

    for problem in range(25):
        mine = sorted((c for c in candidates if c.problem_id == problem), key=lambda c: -c.score)
        wrong = [c.solution_id for c in mine if c.answer_correct is False][:3]  # 3.2 -> 3
        rest = [c.solution_id for c in mine if c.solution_id not in wrong]
        # Then the most convincing of the rest, any answer, up to 4.
        assert {c.solution_id for c in mine} & chosen == {*wrong, *rest[: 4 - len(wrong)]}


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

    for problem in range(25):
        picks = [i for i in random_wrong if i // 100 == problem]
        wrong = sum(c.answer_correct is False for c in candidates if c.problem_id == problem)
        assert sum(correctness[i] is False for i in picks) >= min(3, wrong)
    scores = {c.solution_id: c.score for c in candidates}
    mean = lambda ids: sum(scores[i] for i in ids) / len(ids)  # noqa: E731
    assert mean(convincing) > mean(random_wrong) + 0.1


def test_uncertain_takes_the_highest_first_error_entropy() -> None:
    candidates = [
        Candidate(1, 1, 0.5, None, Uncertainty(total=0.1)),
        Candidate(2, 1, 0.5, None, Uncertainty(total=0.9)),
        Candidate(3, 1, 0.5, None, Uncertainty(total=0.5)),
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


def test_members_that_agree_leave_no_epistemic_uncertainty() -> None:
    agreeing = uncertainty_of(np.array([[0.9, 0.5, 0.2]] * 4))

    assert agreeing.epistemic == pytest.approx(0.0, abs=1e-12)
    assert agreeing.total == pytest.approx(first_error_entropy([0.9, 0.5, 0.2]))
    # Step 2 (P(fine) one half) is a coin toss (1 bit), with no spread: (1 + 0) / 2.
    assert agreeing.steps == pytest.approx(0.5)


def test_members_that_disagree_are_uncertain_where_they_disagree() -> None:
    # Two members sure of opposite things about the first step; the mixture is a coin toss.
    disagreeing = uncertainty_of(np.array([[0.99, 0.99], [0.01, 0.99]]))
    sure = uncertainty_of(np.array([[0.99, 0.99], [0.99, 0.99]]))

    assert disagreeing.epistemic > 0.5 > sure.epistemic
    assert disagreeing.epistemic < disagreeing.total  # part of it is each member's own doubt
    # At step 1: a coin toss (1 bit) and twice the members' spread (0.98), averaged.
    assert disagreeing.steps == pytest.approx(0.99)
    assert sure.steps < 0.1
    # Steps after the first error the mixture predicts are not rated, so do not count.
    late = uncertainty_of(np.array([[0.01, 0.99, 0.5], [0.01, 0.99, 0.5]]))
    assert late.steps < 0.1


def _ranked(strategy: Any, candidates: list[Candidate], k: int) -> list[int]:
    return select(candidates, SelectionPlan(strategy=strategy, global_top_k=k))


def test_the_uncertainty_strategies_rank_by_their_own_measure() -> None:
    candidates = [
        Candidate(1, 1, 0.9, False, Uncertainty(total=0.2, epistemic=0.15, steps=0.3)),
        Candidate(2, 2, 0.1, False, Uncertainty(total=0.9, epistemic=0.01, steps=0.95)),
        Candidate(3, 3, 0.5, True, Uncertainty(total=0.5, epistemic=0.3, steps=0.4)),
    ]

    assert _ranked("uncertain", candidates, 1) == [2]
    assert _ranked("disagreement", candidates, 1) == [3]
    assert _ranked("ensemble", candidates, 1) == [2]
    # 0.2 * 0.9 (a wrong answer it believes) against 0.9 * 0.1 and 0.5 * 0.5.
    assert _ranked("convincing_uncertain", candidates, 1) == [3]
    assert _ranked("convincing_uncertain", candidates[:2], 1) == [1]


def test_diverse_passes_over_a_near_copy_of_its_first_pick() -> None:
    def at(solution: int, steps: float, x: float) -> Candidate:
        return Candidate(
            solution, solution, 0.5, None, Uncertainty(steps=steps), np.array([x, 0.0])
        )

    candidates = [at(1, 0.9, 0.0), at(2, 0.89, 0.01), at(3, 0.6, 5.0), at(4, 0.5, 2.5)]

    assert _ranked("ensemble", candidates, 2) == [1, 2]
    assert _ranked("diverse", candidates, 2) == [1, 3]
