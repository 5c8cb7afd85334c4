"""Rows stored before migration 0015 get their PRM800K text (app/datasets/stored_text.py):
afterwards a pull copies it, and gives the bytes it built from the rows before."""

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli import cli
from app.datasets import export, stored_text
from app.models import Label, Solution, TaskStyle
from tests.datasets.test_prm800k_roundtrip import edge_case_text, import_text
from tests.datasets.test_stored_text import pulled, stored
from tests.factories import make_label, make_solution, make_user

runner = CliRunner()


def _labels_of_every_kind(session: Session, shared_data: Path) -> None:
    """Imported phase-1 and phase-2 lines and edge cases, labels made in the app on a
    phase-2 and a phase-1 task, and an unlabeled solution."""
    import_text(session, edge_case_text())
    import_text(session, (shared_data / "prm800k_raw_samples.jsonl").read_text())
    labeler = make_user(session, "lab")
    make_label(session, labeler, make_solution(session), [[1], [-1]], finish_reason="found_error")
    phase1 = make_solution(session)
    phase1.style = TaskStyle.PHASE1.value
    make_label(session, labeler, phase1, [[1, 0], [None]], finish_reason=None)
    make_solution(session)


def _forget_stored_text(session: Session) -> None:
    """The rows as migration 0015 found them."""
    session.execute(update(Label).values(prm800k_label=None))
    session.execute(update(Solution).values(prm800k_question=None))


def _fill(session: Session, batch: stored_text.Batch, size: int) -> tuple[int, int]:
    stored_rows = unwritable = after = 0
    while True:
        after, done, left = batch(session, after, size)
        if not after:
            return stored_rows, unwritable
        stored_rows += done
        unwritable += left


def test_filled_rows_pull_the_bytes_built_before(
    session: Session, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _labels_of_every_kind(session, shared_data)
    _forget_stored_text(session)
    labels, solutions = stored(session)
    assert labels > 10 and solutions > 3
    built = pulled(session)

    assert _fill(session, stored_text.fill_solution_batch, 3) == (solutions, 0)
    assert _fill(session, stored_text.fill_label_batch, 4) == (labels, 0)
    assert stored(session) == (0, 0)
    assert _fill(session, stored_text.fill_label_batch, 4) == (0, 0)  # nothing left to do
    # Every line from stored text now: building one from the rows would fail.
    monkeypatch.setattr(export, "_labels_where", None)
    assert pulled(session) == built


def test_stored_text_is_left_as_it_is(session: Session, shared_data: Path) -> None:
    """Only rows without text are written: the fill never rewrites a newer row's text."""
    import_text(session, (shared_data / "prm800k_raw_samples.jsonl").read_text())
    session.execute(update(Label).values(prm800k_label='{"kept": 1}'))
    assert _fill(session, stored_text.fill_label_batch, 2) == (0, 0)
    assert set(session.scalars(select(Label.prm800k_label))) == {'{"kept": 1}'}


def test_a_question_json_cannot_write_stays_null(session: Session) -> None:
    if session.get_bind().dialect.name == "sqlite":
        pytest.skip("SQLite stores NaN as null")
    solution = make_solution(session)
    solution.verifier_score = float("nan")
    make_label(session, make_user(session, "lab"), solution, [[1]])
    _forget_stored_text(session)
    assert _fill(session, stored_text.fill_solution_batch, 10) == (0, 1)
    assert _fill(session, stored_text.fill_label_batch, 10) == (1, 0)
    assert stored(session) == (0, 1)
    with pytest.raises(export.ExportError, match="NaN or infinite"):
        pulled(session)


def _committed_labels(engine: Engine, shared_data: Path) -> str:
    """Labels of every kind committed without stored text; what a pull gives for them."""
    with Session(engine) as session:
        _labels_of_every_kind(session, shared_data)
        _forget_stored_text(session)
        session.commit()
        return pulled(session)


def _pulled_and_counted(engine: Engine) -> tuple[str, tuple[int, int]]:
    with Session(engine) as session:
        return pulled(session), stored(session)


def test_a_stopped_fill_goes_on_where_it_stopped(engine: Engine, shared_data: Path) -> None:
    built = _committed_labels(engine, shared_data)
    labels, solutions = _pulled_and_counted(engine)[1]
    calls = []

    def stopped_after_one_batch(session: Session, after: int, size: int) -> Any:
        calls.append(after)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as if killed while the second batch was written
        return stored_text.fill_label_batch(session, after, size)

    with pytest.raises(KeyboardInterrupt):
        stored_text._fill(engine, stopped_after_one_batch, 5)
    assert _pulled_and_counted(engine) == (built, (labels - 5, solutions))

    summary = stored_text.fill_stored_text(engine, batch_size=5)
    assert (summary.labels, summary.solutions, summary.unwritable_questions) == (
        labels - 5,
        solutions,
        0,
    )
    assert _pulled_and_counted(engine) == (built, (0, 0))


def test_migrate_and_the_command_fill_and_report(engine: Engine, shared_data: Path) -> None:
    built = _committed_labels(engine, shared_data)
    labels, solutions = _pulled_and_counted(engine)[1]

    migrated = runner.invoke(cli, ["migrate"])
    assert migrated.exit_code == 0, migrated.output
    assert f"stored the PRM800K text of {labels} labels and {solutions} solutions" in (
        migrated.stdout
    )
    assert _pulled_and_counted(engine) == (built, (0, 0))

    again = runner.invoke(cli, ["fill-stored-text"])
    assert again.exit_code == 0, again.output
    assert "stored the PRM800K text of 0 labels and 0 solutions; 0 solutions left" in again.stdout
