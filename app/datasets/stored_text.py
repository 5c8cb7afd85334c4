"""Fill in the stored PRM800K text of rows written before migration 0015.

Labels and solutions stored before it have no ``prm800k_label`` / ``prm800k_question``, and
a pull builds their lines from the rows (app/datasets/export.py, ``line_chunk``). Here
each gets the text export builds from its rows, so that the pull copies it as it copies
the text of newer rows: the bytes pulled are the same either way.

Each batch is its own transaction and only rows still without text are read, so a run
that is stopped keeps the batches it committed and the next run goes on from there. A
solution whose question JSON cannot write (a NaN score on Postgres) keeps null: its
labels' pulls refuse it, as export does.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, bindparam, select, update
from sqlalchemy.orm import Session

from app import prm800k
from app.core.db import transaction
from app.datasets import export
from app.models import Label, Problem, Solution

BATCH_SIZE = 1000

LABELS = Label.__table__.c
SOLUTIONS = Solution.__table__.c
PROBLEMS = Problem.__table__.c


@dataclass
class FillSummary:
    """What a fill stored, and what it could not."""

    labels: int = 0
    solutions: int = 0
    unwritable_questions: int = 0
    """Solutions whose question holds a value JSON cannot write: left null."""

    def describe(self) -> str:
        return (
            f"stored the PRM800K text of {self.labels} labels and {self.solutions} solutions; "
            f"{self.unwritable_questions} solutions left without (a score JSON cannot write)"
        )


Batch = Callable[[Session, int, int], tuple[int, int, int]]
"""(session, after this id, at most this many) -> (last id read or 0, stored, unwritable)."""


def fill_solution_batch(session: Session, after: int, size: int) -> tuple[int, int, int]:
    """Store the ``question`` text of up to ``size`` solutions without it, after id ``after``."""
    rows = session.execute(
        select(
            SOLUTIONS.id,
            SOLUTIONS.style,
            SOLUTIONS.steps,
            SOLUTIONS.answer,
            SOLUTIONS.verifier_score,
            PROBLEMS.text,
            PROBLEMS.ground_truth_solution,
            PROBLEMS.ground_truth_answer,
        )
        .join(Problem.__table__, PROBLEMS.id == SOLUTIONS.problem_id)
        .where(SOLUTIONS.prm800k_question.is_(None), SOLUTIONS.id > after)
        .order_by(SOLUTIONS.id)
        .limit(size)
    ).all()
    if not rows:
        return 0, 0, 0
    texts = [
        (
            row.id,
            prm800k.question_text(
                row.text,
                row.ground_truth_solution,
                row.ground_truth_answer,
                prm800k.pre_generated_of(row.style, row.steps, row.answer, row.verifier_score),
            ),
        )
        for row in rows
    ]
    stored = [{"row_id": row_id, "text": text} for row_id, text in texts if text is not None]
    _store(session, SOLUTIONS.prm800k_question, stored)
    return rows[-1].id, len(stored), len(rows) - len(stored)


def fill_label_batch(session: Session, after: int, size: int) -> tuple[int, int, int]:
    """Store the ``label`` text of up to ``size`` labels without it, after id ``after``."""
    ids = session.scalars(
        select(LABELS.id)
        .where(LABELS.prm800k_label.is_(None), LABELS.id > after)
        .order_by(LABELS.id)
        .limit(size)
    ).all()
    if not ids:
        return 0, 0, 0
    stored = [
        {"row_id": label_id, "text": prm800k.dumps(record["label"])}
        for label_id, _solution, record in export.built_records(session, ids)
    ]
    _store(session, LABELS.prm800k_label, stored)
    return ids[-1], len(stored), 0


def _store(session: Session, column: Any, rows: list[dict[str, Any]]) -> None:
    """Set ``column`` to each row's text where it is still null (one executemany)."""
    if not rows:
        return
    table = column.table
    session.execute(
        update(table)
        .where(table.c.id == bindparam("row_id"), column.is_(None))
        .values({column.key: bindparam("text")}),
        rows,
    )


def fill_stored_text(engine: Engine, batch_size: int = BATCH_SIZE) -> FillSummary:
    """Store the text of every label and solution without it, a transaction per batch."""
    summary = FillSummary()
    summary.solutions, summary.unwritable_questions = _fill(engine, fill_solution_batch, batch_size)
    summary.labels, _ = _fill(engine, fill_label_batch, batch_size)
    return summary


def _fill(engine: Engine, batch: Batch, batch_size: int) -> tuple[int, int]:
    stored = unwritable = after = 0
    while True:
        with transaction(engine) as session:
            after, done, left = batch(session, after, batch_size)
        if not after:
            return stored, unwritable
        stored += done
        unwritable += left
