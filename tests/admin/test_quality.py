"""Labelers against gold labels, checked with a plain-Python reference over the fixture."""

import random
from dataclasses import dataclass

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.models import (
    SCREENING_GENERATION,
    UNNUMBERED_GENERATION,
    Label,
    QueueState,
    Role,
    Solution,
    User,
)
from app.quality.questions import mark_quality_control
from app.quality.review import gold_candidates, qc_questions, sample_for_agreement
from app.quality.scoring import (
    GoldComparison,
    combined,
    gold_comparisons,
    labeler_quality,
    quality_control_by_generation,
)
from tests.admin import projects
from tests.admin.projects import Ratings, compared_with_gold, random_gold_questions, store_gold
from tests.factories import make_label, make_solution, make_user


@dataclass(frozen=True)
class Answer:
    labeler: str
    question: str
    ratings: Ratings
    finish: str


GOLD: dict[str, tuple[Ratings, str]] = {
    "s1": ([[1], [1], [-1, 1]], "found_error"),
    "s2": ([[1], [0], [1]], "solution"),
    "screen": ([[1], [-1, 0]], "found_error"),
    "gave-up-gold": ([[1], [1]], "give_up"),
}
ANSWERS = [
    Answer("alice", "s1", [[1], [0], [-1, 0]], "found_error"),
    Answer("alice", "s2", [[1], [0], [1]], "solution"),
    Answer("alice", "gave-up-gold", [[1], [0]], "solution"),
    Answer("bob", "s1", [[1], [-1, None]], "found_error"),
    Answer("bob", "s2", [[1]], "give_up"),
    Answer("carol", "screen", [[1], [-1, 0]], "found_error"),
    Answer("dave", "screen", [[-1]], "found_error"),
    Answer("dave", "s2", [[1], [0], [-1]], "found_error"),
]
LABELERS = ("alice", "bob", "carol", "dave", "erin")


def reference(answers: list[Answer]) -> GoldComparison:
    return compared_with_gold((a.ratings, a.finish, *GOLD[a.question]) for a in answers)


def build(session: Session) -> dict[str, Solution]:
    admin = make_user(session, "root", role=Role.ADMIN)
    users = {name: make_user(session, name, approved=name != "dave") for name in LABELERS}
    solutions = {
        key: make_solution(
            session, generation=SCREENING_GENERATION if key == "screen" else 0, overlap=None
        )
        for key in GOLD
    }
    for key, (ratings, finish) in GOLD.items():
        gold = make_label(session, admin, solutions[key], ratings, finish_reason=finish)
        mark_quality_control(session, solutions[key].id, gold.id)
    for answer in ANSWERS:
        make_label(
            session,
            users[answer.labeler],
            solutions[answer.question],
            answer.ratings,
            finish_reason=answer.finish,
        )
    # Regular work on a solution without a gold label is no answer.
    make_label(session, users["alice"], make_solution(session), [[-1]], finish_reason="found_error")
    return solutions


def answers_of(labeler: str, screening: bool) -> list[Answer]:
    return [a for a in ANSWERS if a.labeler == labeler and (a.question == "screen") == screening]


def test_each_labeler_against_the_reference(session: Session) -> None:
    build(session)
    threshold = 0.75
    rows = {row.name: row for row in labeler_quality(session, threshold)}
    assert list(rows) == sorted(LABELERS)
    for name in LABELERS:
        qc, screening = reference(answers_of(name, False)), reference(answers_of(name, True))
        assert rows[name].quality_control == qc, name
        assert rows[name].screening == screening, name
        expected_qc = None if qc.step_accuracy is None else qc.step_accuracy >= threshold
        assert rows[name].passes_quality_control is expected_qc


def test_counted_by_hand(session: Session) -> None:
    build(session)
    rows = {row.name: row for row in labeler_quality(session, 0.75)}
    alice = rows["alice"].quality_control
    # s1: 1=1, 0≠1, -1=-1, 0≠1; s2: three equal; gave-up-gold: 1=1, 0≠1.
    assert (alice.answers, alice.steps_compared, alice.steps_agreeing) == (3, 9, 6)
    # The gold label of gave-up-gold was given up on: no first error to compare with.
    assert (alice.first_errors_compared, alice.first_errors_agreeing) == (2, 2)
    bob = rows["bob"].quality_control
    # An unrated completion is not compared; a given-up answer has no first error.
    assert (bob.steps_compared, bob.steps_agreeing, bob.first_errors_compared) == (3, 2, 1)
    assert bob.first_error_accuracy == 0.0
    assert rows["carol"].screening.step_accuracy == 1.0
    assert rows["dave"].passes_screening is False and rows["carol"].passes_screening is True
    assert rows["erin"].passes_quality_control is None
    assert rows["erin"].quality_control == GoldComparison()


def test_per_question_and_pooled(session: Session) -> None:
    solutions = build(session)
    by_question = gold_comparisons(session, ("solution_id",))
    for key, solution in solutions.items():
        expected = reference([a for a in ANSWERS if a.question == key])
        assert by_question[(solution.id,)] == expected
    questions = {q.solution_id: q for q in qc_questions(session)}
    s1 = questions[solutions["s1"].id]
    assert (s1.gold_labeler, s1.gold_finish_reason, s1.gold_first_error) == (
        "root",
        "found_error",
        2,
    )
    assert questions[solutions["s2"].id].gold_first_error is None
    assert questions[solutions["screen"].id].generation == SCREENING_GENERATION
    assert s1.answers == reference([a for a in ANSWERS if a.question == "s1"])
    everyone = combined(row.quality_control for row in labeler_quality(session, 0.5))
    assert everyone == reference([a for a in ANSWERS if a.question != "screen"])


def test_qc_accuracy_of_one_generation_and_pooled_per_generation(session: Session) -> None:
    questions = random_gold_questions(seed=4, generations=(0, 1, 2))
    store_gold(session, questions, {})
    by_generation = quality_control_by_generation(session)
    assert set(by_generation) == {0, 1, 2}
    for generation in (0, 1, 2):
        assert by_generation[generation] == questions.reference(generation=generation)
        rows = labeler_quality(session, 0.7, generation=generation)
        assert [row.name for row in rows] == sorted(projects.LABELERS)
        for row in rows:
            expected = questions.reference(labeler=row.name, generation=generation)
            assert row.quality_control == expected
            assert row.passes_quality_control is expected.passes(0.7)
            # Screening is not served in generations: the score is over every answer.
            assert row.screening == questions.reference(labeler=row.name, screening=True)
    assert combined(by_generation.values()) == questions.reference()
    everyone = {row.name: row for row in labeler_quality(session, 0.7)}
    assert everyone["ann"].quality_control == questions.reference(labeler="ann")
    assert 0 < everyone["ann"].quality_control.answers == 6  # two questions, three generations


def test_qc_accuracy_of_the_answers_without_a_generation(session: Session) -> None:
    """The Agreement page's "none" filter: answers served before the worker opened
    generations (or in phase 1) carry none, and are each labeler's QC figures there."""
    questions = random_gold_questions(seed=5, generations=(None,))
    store_gold(session, questions, {})
    # The factory gives a label its solution's generation where it is given none.
    session.execute(update(Label).where(Label.is_quality_control).values(generation=None))
    unnumbered = labeler_quality(session, 0.7, generation=UNNUMBERED_GENERATION)
    assert [row.name for row in unnumbered] == sorted(projects.LABELERS)
    for row in unnumbered:
        expected = questions.reference(labeler=row.name)  # every QC answer has none
        assert 0 < row.quality_control.answers == expected.answers
        assert row.quality_control == expected
    assert all(row.quality_control.answers == 0 for row in labeler_quality(session, 0.7, 0))


def test_a_new_answer_moves_the_labelers_accuracy(session: Session) -> None:
    solutions = build(session)
    before = {row.name: row for row in labeler_quality(session, 0.75)}["alice"]
    alice = session.scalar(select(User).where(User.name == "alice"))
    assert alice is not None
    answer = Answer("alice", "s2", [[1], [1], [1]], "solution")
    make_label(session, alice, solutions["s2"], answer.ratings)
    after = {row.name: row for row in labeler_quality(session, 0.75)}["alice"]
    assert after.quality_control.answers == before.quality_control.answers + 1
    assert after.quality_control == reference([*answers_of("alice", False), answer])


def test_gold_candidates_are_the_admins_own_labels(session: Session) -> None:
    solutions = build(session)
    mine = gold_candidates(session, labeler_id=_user_id(session, "root"))
    assert {c.solution_id for c in mine} == {s.id for s in solutions.values()}
    assert all(c.gold_label_id == c.label_id for c in mine)
    s1 = next(c for c in mine if c.solution_id == solutions["s1"].id)
    assert s1.first_error == 2 and s1.finish_reason == "found_error"
    assert len(gold_candidates(session, _user_id(session, "root"), limit=2)) == 2
    alices = gold_candidates(session, _user_id(session, "alice"))
    assert [c.gold_label_id is None for c in alices].count(True) == 1


def _user_id(session: Session, name: str) -> int:
    user_id = session.scalar(select(User.id).where(User.name == name))
    assert user_id is not None
    return user_id


def test_sample_for_agreement_raises_the_overlap_of_a_random_draw(session: Session) -> None:
    open_ids = [make_solution(session, generation=3).id for _ in range(6)]
    already = make_solution(session, generation=3, overlap=4).id
    full = make_solution(session, generation=3, queue_state=QueueState.FULL).id
    other = make_solution(session, generation=4).id

    drawn = sample_for_agreement(session, 3, 4, 3, default_overlap=1, rng=random.Random(7))
    assert drawn == 4
    overlaps = {i: overlap for i, overlap in session.execute(select(Solution.id, Solution.overlap))}
    expected = set(random.Random(7).sample(sorted(open_ids), 4))
    assert {i for i in open_ids if overlaps[i] == 3} == expected
    assert (overlaps[already], overlaps[full], overlaps[other]) == (4, None, None)
    # More than are left: every remaining candidate, no error.
    assert sample_for_agreement(session, 3, 50, 3, default_overlap=1) == 2


@pytest.mark.parametrize(
    ("generation", "count", "overlap", "default", "message"),
    [
        (3, 0, 3, 1, "between 1 and"),
        (3, 5, 1, 1, "at least 2 labelers"),
        (SCREENING_GENERATION, 5, 3, 1, "every labeler already"),
        (9, 5, 3, 1, "generation 9 has no open solution"),
        (3, 5, 3, 3, "fewer than 3 labelers"),
    ],
)
def test_sample_for_agreement_refuses_what_makes_no_sense(
    session: Session, generation: int, count: int, overlap: int, default: int, message: str
) -> None:
    make_solution(session, generation=3)
    with pytest.raises(ValueError, match=message):
        sample_for_agreement(session, generation, count, overlap, default_overlap=default)
    assert session.scalar(select(Solution.overlap)) is None


def test_qc_gives_no_verdict_before_enough_answers_and_counts_them(session: Session) -> None:
    build(session)
    # alice answered three QC questions (6 of 9 steps agree), bob two, dave one (1 of 3).
    rows = {row.name: row for row in labeler_quality(session, 0.75, min_answers=3)}
    assert rows["alice"].passes_quality_control is False
    assert rows["bob"].passes_quality_control is None
    assert rows["dave"].passes_quality_control is None
    assert rows["dave"].quality_control.answers == 1
    # Screening is one set, judged whole: no minimum applies to it.
    assert rows["dave"].passes_screening is False
    one_each = {row.name: row for row in labeler_quality(session, 0.75, min_answers=1)}
    assert one_each["dave"].passes_quality_control is False


def test_qc_answers_that_rate_no_step_of_the_key_give_no_verdict(session: Session) -> None:
    """A labeler who reports QC questions as bad problems at once has answered them, but
    shown nothing of their ratings: the verdict waits for answers that rate a step."""
    solutions = build(session)
    erin = session.scalar(select(User).where(User.name == "erin"))
    assert erin is not None
    make_label(session, erin, solutions["s2"], [[1], [0], [1]], finish_reason="solution")
    for question in ("s1", "gave-up-gold"):
        make_label(session, erin, solutions[question], [], finish_reason="bad_problem")
    rows = {row.name: row for row in labeler_quality(session, 0.75, min_answers=3)}
    assert (rows["erin"].quality_control.answers, rows["erin"].quality_control.rated_answers) == (
        3,
        1,
    )
    assert rows["erin"].passes_quality_control is None
    assert rows["alice"].quality_control.rated_answers == 3
    one_each = {row.name: row for row in labeler_quality(session, 0.75, min_answers=1)}
    assert one_each["erin"].passes_quality_control is True


def test_an_admins_label_of_a_qc_question_is_no_answer(session: Session) -> None:
    solutions = build(session)
    before = quality_control_by_generation(session)
    admin = session.scalar(select(User).where(User.name == "root"))
    assert admin is not None
    make_label(session, admin, solutions["s1"], [[-1]], finish_reason="found_error")
    assert quality_control_by_generation(session) == before
    assert gold_comparisons(session, ("labeler_id",)).keys() == {
        (user_id,) for user_id in session.scalars(select(User.id).where(User.role == "labeler"))
    } - {(session.scalar(select(User.id).where(User.name == "erin")),)}
