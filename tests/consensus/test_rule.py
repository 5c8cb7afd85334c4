"""The consensus rule on hand-made disagreements."""

import pytest

from app.consensus.rule import Method, Status, Vote, consensus, valid_path


def vote(label_id: int, *ratings: int | None, finish: str | None = None) -> Vote:
    if finish is None:
        finish = "found_error" if -1 in ratings else "solution"
    return Vote(label_id, finish, list(ratings))


def test_unanimous_labels_give_their_ratings() -> None:
    decided = consensus([vote(1, 1, 1, -1), vote(2, 1, 1, -1)], 4)
    assert decided.status == Status.DECIDED
    assert decided.method == Method.UNANIMOUS
    assert decided.ratings == (1, 1, -1)
    assert decided.finish_reason == "found_error"


def test_majority_outvotes_an_early_error() -> None:
    # Labeler 3 saw an error at step 2; the two others went on and agree on step 4.
    votes = [vote(1, 1, 1, 1, -1), vote(2, 1, 1, 1, -1), vote(3, 1, -1)]
    decided = consensus(votes, 5)
    assert (decided.status, decided.method) == (Status.DECIDED, Method.MAJORITY)
    assert decided.ratings == (1, 1, 1, -1)
    assert decided.voters == (1, 2, 3)


def test_majority_error_ends_the_path() -> None:
    decided = consensus([vote(1, 1, -1), vote(2, 1, -1), vote(3, 1, 1, 1)], 3)
    assert decided.ratings == (1, -1)
    assert decided.finish_reason == "found_error"


def test_no_error_by_majority_finishes_as_solution() -> None:
    decided = consensus([vote(1, 1, 1), vote(2, 1, 1), vote(3, -1)], 2)
    assert decided.ratings == (1, 1)
    assert decided.finish_reason == "solution"


def test_two_labelers_who_disagree_on_the_first_error_are_marked() -> None:
    decided = consensus([vote(1, 1, -1), vote(2, 1, 1, -1)], 4)
    assert decided.status == Status.NEEDS_ADJUDICATION
    assert decided.tied_step == 1
    assert decided.ratings == ()
    assert decided.finish_reason is None


def test_three_first_errors_at_three_steps_tie_where_two_voters_remain() -> None:
    # Step 2: one -1 against two others; step 3: labeler 2's -1 against labeler 3's +1.
    decided = consensus([vote(1, 1, -1), vote(2, 1, 1, -1), vote(3, 1, 1, 1, -1)], 5)
    assert decided.status == Status.NEEDS_ADJUDICATION
    assert decided.tied_step == 2


def test_an_even_split_on_an_error_is_a_tie() -> None:
    votes = [vote(1, -1), vote(2, -1), vote(3, 1, 1), vote(4, 0, 1)]
    decided = consensus(votes, 2)
    assert (decided.status, decided.tied_step) == (Status.NEEDS_ADJUDICATION, 0)


def test_neutral_against_positive_is_decided_not_marked() -> None:
    tie = consensus([vote(1, 0, 1), vote(2, 1, 1)], 2)
    assert (tie.status, tie.method, tie.ratings) == (Status.DECIDED, Method.MAJORITY, (0, 1))
    more_positive = consensus([vote(1, 0, 1), vote(2, 1, 1), vote(3, 1, 1)], 2)
    assert more_positive.ratings == (1, 1)
    more_neutral = consensus([vote(1, 0, 0), vote(2, 0, 1), vote(3, 1, 0)], 2)
    assert more_neutral.ratings == (0, 0)


def test_neutral_votes_count_against_an_error() -> None:
    decided = consensus([vote(1, 0, 0), vote(2, 0, 0), vote(3, -1)], 2)
    assert decided.ratings == (0, 0)


def test_labels_that_do_not_judge_do_not_vote() -> None:
    votes = [vote(1, 1, -1), vote(2, 1, finish="give_up"), vote(3, finish="bad_problem")]
    decided = consensus(votes, 3)
    assert (decided.method, decided.ratings, decided.voters) == (Method.SINGLE, (1, -1), (1,))
    nothing = consensus([vote(2, 1, finish="give_up")], 3)
    assert nothing.status == Status.NO_VOTES


def test_valid_path() -> None:
    assert valid_path([1, 0, -1], 4) is None
    assert valid_path([1, 1, 1], 3) is None
    assert valid_path([1, -1, 1], 3) == "step 2 is negative: the steps after it cannot be rated"
    assert valid_path([1, 1], 3) is not None
    assert valid_path([2], 3) == "a rating must be -1, 0 or +1"
    assert valid_path([1, 1, 1, 1], 3) is not None


@pytest.mark.parametrize("count", [2, 3, 5])
def test_identical_votes_are_unanimous_whatever_their_number(count: int) -> None:
    decided = consensus([vote(i, 1, 0, -1) for i in range(count)], 3)
    assert (decided.method, decided.ratings) == (Method.UNANIMOUS, (1, 0, -1))
