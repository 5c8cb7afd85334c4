"""Selection on fixed scores and gradings picks exactly the expected solutions."""

from worker.select import Candidate, select_convincing


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


def test_small_k_keeps_the_split() -> None:
    # K=2 at 50%: one convincing wrong (1) and the most convincing of the others (6).
    assert select_convincing(pool(), per_problem=2, wrong_share=0.5) == [6, 1, 8, 9]


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
