"""Training examples from labels: the labeler's path up to the first error, and branches."""

import io

import pytest
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.datasets.importing import import_prm800k
from app.datasets.reading import read_jsonl
from app.models import Generation, RunStatus, TrainingRun
from tests import factories
from tests.factories import (
    completion,
    human_completion,
    make_label,
    make_rated_label,
    make_solution,
    make_user,
    record,
    step,
)
from worker.data import examples_from_record, training_labels
from worker.split import split_key


def as_tuples(rec: dict[str, object]) -> list[tuple[list[str], list[int | None]]]:
    return [(e.steps, e.labels) for e in examples_from_record(rec)]  # type: ignore[arg-type]


def test_phase2_path_stops_at_the_first_error_and_alternatives_branch() -> None:
    rec = record(
        steps=[
            step(completion("a", 1)),
            step(completion("b", 0)),
            step(completion("c", -1), completion("c'", 1), completion("c''", None), chosen=None),
        ],
        finish_reason="found_error",
    )
    assert as_tuples(rec) == [
        (["a", "b", "c'"], [None, None, 1]),
        (["a", "b", "c"], [1, 0, -1]),
    ]
    groups = {e.problem_id for e in examples_from_record(rec)}
    assert groups == {split_key(rec["question"]["problem"])}  # type: ignore[index]


def test_phase1_choices_and_human_steps() -> None:
    rec = record(
        factories.phase1_question(),
        [
            step(completion("x", 0), completion("y", 1), chosen=1),
            step(
                completion("p", -1),
                completion("q", -1),
                human=human_completion("mine"),
                chosen=None,
            ),
            step(completion("done", 1)),
        ],
    )
    assert as_tuples(rec) == [
        (["x"], [0]),
        (["y", "p"], [None, -1]),
        (["y", "q"], [None, -1]),
        (["y", "mine", "done"], [1, 1, 1]),
    ]


def test_each_rating_is_learned_once_however_many_branches_share_a_prefix() -> None:
    """A phase-1 label: at every step the labeler rated three candidates and went on with one."""
    steps = [
        step(completion(f"{i}a", 1), completion(f"{i}b", 0), completion(f"{i}c", 1), chosen=0)
        for i in range(5)
    ]
    rec = record(factories.phase1_question(), steps)

    examples = list(examples_from_record(rec))

    # The ratings given: 3 per step, 15 in all. Each appears on exactly one labeled step.
    labeled = [(e.steps[i], label) for e in examples for i, label in e.labeled]
    assert len(labeled) == 15
    assert sorted(labeled) == sorted(
        (f"{i}{letter}", rating)
        for i in range(5)
        for letter, rating in (("a", 1), ("b", 0), ("c", 1))
    )
    positives = sum(1 for _, label in labeled if label == 1)
    assert positives == 10, "a shared prefix would count the chosen steps again per branch"


def test_a_step_with_null_completions_ends_the_path() -> None:
    """Real PRM800K lines can have ``completions: null`` (a give-up mid-way)."""
    rec = record(
        factories.phase1_question(),
        [step(completion("x", 1), chosen=0), step(chosen=None)],
    )
    rec["label"]["steps"][1]["completions"] = None  # type: ignore[index]

    assert as_tuples(rec) == [(["x"], [1])]


def test_training_labels_leave_out_qc_screening_and_unjudged_labels(session: Session) -> None:
    records = [
        record(steps=[step(completion("kept", 1))], timestamp="2022-01-01T00:00:00.000001"),
        record(steps=[step(completion("qc", 1))], qc=True, timestamp="2022-01-01T00:00:00.000002"),
        record(
            steps=[step(completion("screen", 1))],
            screening=True,
            timestamp="2022-01-01T00:00:00.000003",
        ),
        record(
            steps=[step(completion("gave up", 1))],
            finish_reason="give_up",
            timestamp="2022-01-01T00:00:00.000004",
        ),
    ]
    text = "".join(factories.line(r) for r in records)
    import_prm800k(session, read_jsonl("labels", io.BytesIO(text.encode())))
    labels = training_labels(session, Settings())
    assert [[e.steps for e in label.examples] for label in labels] == [[["kept"]]]
    with_qc = Settings(train_include_quality_control=True, train_include_screening=True)
    labels = training_labels(session, with_qc)
    assert sorted(e.steps[0] for label in labels for e in label.examples) == [
        "kept",
        "qc",
        "screen",
    ]
    assert not any(label.chosen_by_prm for label in labels)  # imported: no PRM chose them


def test_labels_know_whether_a_prm_chose_their_solution(session: Session) -> None:
    """A run's selection chose; its control share, an import or a hand-queued one did not."""
    session.add_all([Generation(number=1), Generation(number=2, run_id=add_run(session).id)])
    labeler = make_user(session, "ann")
    by_hand, selected, control = (make_solution(session, generation=g) for g in (1, 2, 2))
    control.is_control = True
    for solution in (by_hand, selected, control):
        make_label(session, labeler, solution, [[1], [1]])

    labels = training_labels(session, Settings())

    assert [label.chosen_by_prm for label in labels] == [False, True, False]
    assert labels[1].problem == selected.problem.text


def test_one_problem_typeset_two_ways_is_one_problem() -> None:
    assert split_key("What is $1 + 1$?") == split_key("what is 1+1 ?")
    assert split_key("What is $1 + 1$?") != split_key("What is $1 + 2$?")


def add_run(session: Session) -> TrainingRun:
    run = TrainingRun(status=RunStatus.SUCCEEDED.value)
    session.add(run)
    session.flush()
    return run


def test_consensus_setting_trains_on_one_label_per_solution(session: Session) -> None:
    alice, bob, carol = (make_user(session, name) for name in ("alice", "bob", "carol"))
    voted = make_solution(session, ["One.", "Two.", "Three."])
    for labeler, ratings in ((alice, [1, -1]), (bob, [1, -1]), (carol, [1, 1, 1])):
        make_rated_label(session, labeler, voted, ratings)
    tied = make_solution(session, ["One.", "Two."])
    make_rated_label(session, alice, tied, [-1])
    make_rated_label(session, bob, tied, [1, 1])

    every_label = training_labels(session, Settings())
    assert len(every_label) == 5

    consensus = training_labels(session, Settings(train_labels="consensus"))
    (label,) = consensus
    assert label.problem == voted.problem.text
    assert [(e.steps, e.labels) for e in label.examples] == [(["One.", "Two."], [1, -1])]


def test_the_consensus_setting_is_checked_at_start() -> None:
    with pytest.raises(ValidationError, match="train_labels"):
        Settings(train_labels="majority")  # type: ignore[arg-type]
