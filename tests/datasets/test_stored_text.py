"""A pull copies each label's stored ``label`` text and its solution's stored ``question``
text (app/prm800k.py, "Stored text") and encodes the rest of the line from the rows: its
lines are ``steplabel export``'s bytes, whatever was written after the label was saved.

Every field of a line, and whether it can change once the label is saved:
- ``labeler`` (users.uuid), ``timestamp``, ``generation``, the QC and screening flags
  (labels), ``external_id`` (solutions.source_id): read from the rows at every pull, so
  that a change shows at once (``test_a_changed_row_shows_in_the_next_pull``).
- ``question`` (the problem's text, ground-truth solution and answer; the solution's
  steps, answer, score and style): stored with the solution; nothing changes these
  columns once stored. What runs later and writes to those rows (a later import filling
  in a problem's metadata, a gold label, grading, adjudication) leaves the lines as built
  from the rows (``test_what_runs_later_leaves_the_lines_true``).
- ``label`` (the label's steps, their completions, total time, finish reason): stored
  with the label, from the rows written with it, which nothing changes.
Rows stored without the text (before migration 0015, or by another writer) are built
from their rows, as export builds them.
"""

import io
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, update
from sqlalchemy.orm import Session

from app import prm800k
from app.consensus.service import adjudicate
from app.datasets import export
from app.datasets.export import ExportFilter
from app.datasets.importing import import_problems, import_solutions
from app.datasets.reading import read_jsonl
from app.models import Label, Role, Solution, User
from app.quality.questions import set_gold
from app.read_ahead import read_side_by_side
from tests.datasets.test_prm800k_roundtrip import edge_case_text, export_text, import_text
from tests.factories import make_label, make_solution, make_user
from tests.labeling.test_queue import NOW
from tests.labeling.test_submission import (
    PHASE1_ALTERNATIVES,
    STEPS,
    next_task,
    phase1_step,
    save,
    submission,
)


def pulled(session: Session, label_filter: ExportFilter | None = None) -> str:
    """The PRM800K text a pull streams, chunk by chunk as ``stream_export`` reads it."""
    chunks, after = [], 0
    while True:
        after, text = export.line_chunk(session, label_filter or ExportFilter(), after)
        if not after:
            return "".join(chunks)
        chunks.append(text)


def stored(session: Session) -> tuple[int, int]:
    """How many labels and solutions have no stored text."""
    labels = select(func.count()).where(Label.prm800k_label.is_(None))
    solutions = select(func.count()).where(Solution.prm800k_question.is_(None))
    return session.scalar(labels) or 0, session.scalar(solutions) or 0


def test_imported_lines_are_stored_and_pulled_byte_for_byte(
    session: Session, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_text(session, edge_case_text())
    import_text(session, (shared_data / "prm800k_raw_samples.jsonl").read_text())
    original = edge_case_text() + (shared_data / "prm800k_raw_samples.jsonl").read_text()
    assert stored(session) == (0, 0)
    expected = export_text(session)
    # Every line from stored text: building one from the rows would fail.
    monkeypatch.setattr(export, "_labels_where", None)
    assert pulled(session) == expected == original


def test_filters_select_the_same_lines(session: Session, shared_data: Path) -> None:
    import_text(session, (shared_data / "prm800k_raw_samples.jsonl").read_text())
    for label_filter in (
        ExportFilter(include_quality_control=False),
        ExportFilter(include_screening=False),
        ExportFilter(generations=[1]),
    ):
        assert pulled(session, label_filter) == export_text(session, label_filter)


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 100])
def test_chunks_read_side_by_side_are_the_pull_in_order(
    engine: Engine, shared_data: Path, monkeypatch: pytest.MonkeyPatch, chunk_size: int
) -> None:
    """Postgres's pull reads its chunks two at a time (app/datasets/pull.py): cut at
    ``chunk_ends``, in any order, they add up to the export, under every filter."""
    with Session(engine) as session:
        import_text(session, edge_case_text())
        import_text(session, (shared_data / "prm800k_raw_samples.jsonl").read_text())
        session.commit()
    monkeypatch.setattr(export, "CHUNK_SIZE", chunk_size)
    for label_filter in (
        ExportFilter(),
        ExportFilter(include_quality_control=False),
        ExportFilter(generations=[1]),
        ExportFilter(generations=[99]),  # none
    ):
        with Session(engine) as session:
            expected = export_text(session, label_filter)
            ends = export.chunk_ends(session, label_filter)
            selected = export.count_labels(session, label_filter)
        assert len(ends) == -(-selected // chunk_size)  # the last chunk may be short
        reads = list(export.stored_line_reads(engine, label_filter))
        backwards = "".join(reversed([read() for read in reversed(reads)]))
        assert "".join(read_side_by_side(reads)) == backwards == expected


def _lines(*records: dict[str, Any]) -> io.BytesIO:
    return io.BytesIO("".join(json.dumps(r) + "\n" for r in records).encode())


def test_labels_saved_in_the_app_are_stored_and_pulled_as_exported(session: Session) -> None:
    phase2 = {"problem": "What is 1+1+2?", "steps": STEPS, "external_id": "run-1"}
    phase2["alternatives"] = [[], ["Then $2+2=4$.", "So $4$."]]
    phase1 = {"problem": "What is 2+2?", "steps": STEPS, "style": "phase1"}
    phase1["alternatives"] = PHASE1_ALTERNATIVES
    import_solutions(session, read_jsonl("s.jsonl", _lines(phase2, phase1)))
    alice, bob = make_user(session, "alice"), make_user(session, "bob")
    later = NOW + timedelta(seconds=3)
    for labeler in (alice, bob):
        task = next_task(session, labeler)
        if task.style == "phase1":
            steps = [
                phase1_step(0, [1], chosen=1, flagged=True),
                phase1_step(-1, [-1, 0], human_text="Then $2+2=4$, so far so good."),
                phase1_step(1, [], chosen=0),
            ]
            sent = submission([], "solution", steps=steps)
        else:
            steps = [{"rating": 1, "flagged": True}, {"rating": -1, "alternative_ratings": [1, 0]}]
            sent = submission([], "found_error", steps=steps)
        save(session, task, labeler, sent, now=later)
    assert stored(session) == (0, 0)
    assert pulled(session) == export_text(session)
    assert len(pulled(session).splitlines()) == 2


def test_rows_without_stored_text_are_built(session: Session, shared_data: Path) -> None:
    import_text(session, (shared_data / "prm800k_raw_samples.jsonl").read_text())
    labeler = make_user(session, "lab")
    make_label(session, labeler, make_solution(session), [[1], [-1]], finish_reason="found_error")
    first = session.scalar(select(func.min(Label.id)))
    session.execute(update(Label).where(Label.id == first).values(prm800k_label=None))
    session.execute(update(Solution).values(prm800k_question=None))
    assert pulled(session) == export_text(session)


def test_a_question_json_cannot_write_is_refused_as_export_refuses_it(session: Session) -> None:
    if session.get_bind().dialect.name == "sqlite":
        pytest.skip("SQLite stores NaN as null")
    labeler = make_user(session, "lab")
    solution = make_solution(session)
    solution.verifier_score = float("nan")
    make_label(session, labeler, solution, [[1]])
    with pytest.raises(export.ExportError, match="NaN or infinite"):
        pulled(session)


NEW_UUID = "0f0e0d0c-0b0a-4909-8807-060504030201"
Change = Callable[[Session], Any]
CHANGES: dict[str, tuple[Change, str, object]] = {
    "labeler": (
        lambda s: s.execute(
            update(User)
            .where(User.id == select(func.min(Label.labeler_id)).scalar_subquery())
            .values(uuid=NEW_UUID)
        ),
        "labeler",
        NEW_UUID,
    ),
    "timestamp": (
        lambda s: s.execute(update(Label).values(timestamp=datetime(2030, 1, 2, 3, 4, 5, 6))),
        "timestamp",
        "2030-01-02T03:04:05.000006",
    ),
    "generation": (lambda s: s.execute(update(Label).values(generation=7)), "generation", 7),
    "quality control": (
        lambda s: s.execute(update(Label).values(is_quality_control=True)),
        "is_quality_control_question",
        True,
    ),
    "screening": (
        lambda s: s.execute(update(Label).values(is_initial_screening=True)),
        "is_initial_screening_question",
        True,
    ),
    "external id": (
        lambda s: s.execute(update(Solution).values(source_id="team-7")),
        "external_id",
        "team-7",
    ),
}


@pytest.mark.parametrize("field", list(CHANGES))
def test_a_changed_row_shows_in_the_next_pull(
    session: Session, shared_data: Path, field: str
) -> None:
    """The fields read from the rows at each pull follow the rows."""
    text = (shared_data / "prm800k_raw_samples.jsonl").read_text()
    import_text(session, text)
    change, key, value = CHANGES[field]
    change(session)
    session.expire_all()
    lines = pulled(session)
    assert lines == export_text(session) != text
    assert value in [record.get(key) for record in lines_read(lines)]


def lines_read(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_what_runs_later_leaves_the_lines_true(session: Session, shared_data: Path) -> None:
    """Later writes to a labeled solution's and problem's rows touch no stored field."""
    text = (shared_data / "prm800k_raw_samples.jsonl").read_text()
    import_text(session, text)
    admin = make_user(session, "admin", role=Role.ADMIN)
    labels = session.execute(
        select(Label.id, Label.solution_id).where(Label.solution_id.is_not(None))
    ).all()
    set_gold(session, admin, labels[0].solution_id, labels[0].id)
    adjudicate(session, labels[-1].solution_id, admin.id, source_label_id=labels[-1].id)
    session.execute(update(Solution).values(answer_correct=True, overlap=3))
    # The same problem again, with the metadata a MATH split gives: filled in.
    lines = text.splitlines()
    question = next(json.loads(x)["question"] for x in lines if "ground_truth_solution" in x)
    metadata = {"subject": "Algebra", "level": 2, "unique_id": "test/algebra/1.json"}
    problem = {"problem": question["problem"], "solution": question["ground_truth_solution"]}
    problem |= {"answer": question["ground_truth_answer"], **metadata}
    import_problems(session, read_jsonl("p.jsonl", _lines(problem)))
    import_text(session, text)  # again: adds nothing
    session.expire_all()
    assert pulled(session) == export_text(session) == text


def test_line_text_is_dumps_of_the_record(session: Session) -> None:
    """The line spliced from text is ``dumps`` of the record dict, for every kind of value."""
    question = {"problem": 'Say "é\\u2028"', "ground_truth_answer": None}
    label_body = prm800k.label_dict([], None, None)
    for generation in (None, 0, -1, 12):
        for flags in ((False, True), (True, False)):
            for external_id in (None, "", 'x"\n\u00e9'):
                fields: dict[str, Any] = {
                    "labeler": NEW_UUID,
                    "timestamp": datetime(2022, 5, 1, 0, 0, 0),
                    "generation": generation,
                    "is_quality_control": flags[0],
                    "is_initial_screening": flags[1],
                    "external_id": external_id,
                }
                record = prm800k.record_dict(
                    question=question, steps=[], total_time=None, finish_reason=None, **fields
                )
                spliced = prm800k.line_text(
                    **fields, question=prm800k.dumps(question), label=prm800k.dumps(label_body)
                )
                assert spliced == prm800k.dumps(record) + "\n"
