"""The notes labelers leave when they give up on a task or report a bad problem: a paged
list for the admin pages, and a JSONL export of their own.

PRM800K has no field for a note, so the PRM800K export leaves them out; a notes line carries
the label's ``labeler`` UUID and ``timestamp`` as the PRM800K line writes them, which join it
to that line.
"""

import json
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, TextIO

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from app.datasets.export import AnySelect, ExportFilter
from app.models import FinishReason, Label, Problem, User

NOTES_PER_PAGE = 25
NOTE_REASONS = (FinishReason.GIVE_UP.value, FinishReason.BAD_PROBLEM.value)
"""The finish reasons that ask the labeler for a note."""
CHUNK_SIZE = 1000


@dataclass(frozen=True)
class Note:
    """One label's note, with who left it, on what, why and when."""

    label_id: int
    timestamp: datetime
    labeler: str
    """The labeler's UUID, as the PRM800K export writes it."""
    labeler_name: str
    finish_reason: str
    note: str
    generation: int | None
    problem_id: int
    problem: str
    problem_unique_id: str | None
    """The MATH ``unique_id`` (``test/algebra/1.json``) of an imported problem."""
    solution_id: int | None
    is_quality_control: bool
    is_initial_screening: bool

    def line(self) -> str:
        """The note as one JSONL line (timestamp in PRM800K's format)."""
        record: dict[str, Any] = asdict(self) | {"timestamp": self.timestamp.isoformat()}
        return json.dumps(record, ensure_ascii=False)


@dataclass(frozen=True)
class NotesPage:
    notes: list[Note]
    reason: str | None
    """The finish reason shown, None for both."""
    page: int
    page_count: int
    total: int


def _with_note(reason: str | None) -> ColumnElement[bool]:
    reasons = NOTE_REASONS if reason is None else (reason,)
    return Label.finish_reason.in_(reasons) & Label.note.is_not(None) & (Label.note != "")


def _notes_query(reason: str | None) -> AnySelect:
    return (
        select(
            Label.id.label("label_id"),
            Label.timestamp,
            User.uuid.label("labeler"),
            User.name.label("labeler_name"),
            Label.finish_reason,
            Label.note,
            Label.generation,
            Label.problem_id,
            Problem.text.label("problem"),
            Problem.source_id.label("problem_unique_id"),
            Label.solution_id,
            Label.is_quality_control,
            Label.is_initial_screening,
        )
        .join(User, User.id == Label.labeler_id)
        .join(Problem, Problem.id == Label.problem_id)
        .where(_with_note(reason))
    )


def notes_page(
    session: Session, reason: str | None = None, page: int = 1, per_page: int = NOTES_PER_PAGE
) -> NotesPage:
    """One page of notes, newest first, of one finish reason or both; ``page`` is clamped."""
    total = session.scalar(select(func.count()).select_from(Label).where(_with_note(reason))) or 0
    page_count = max(1, math.ceil(total / per_page))
    page = min(max(page, 1), page_count)
    rows = session.execute(
        _notes_query(reason)
        .order_by(Label.timestamp.desc(), Label.id.desc())
        .limit(per_page)
        .offset((page - 1) * per_page)
    )
    notes = [Note(**row._asdict()) for row in rows]
    return NotesPage(notes, reason, page, page_count, total)


def iter_notes(session: Session, label_filter: ExportFilter) -> Iterator[Note]:
    """Every note of the labels ``label_filter`` selects, in label id order, in chunks."""
    query = label_filter.apply(_notes_query(None)).order_by(Label.id)
    last_id = 0
    while True:
        rows = session.execute(query.where(Label.id > last_id).limit(CHUNK_SIZE)).all()
        yield from (Note(**row._asdict()) for row in rows)
        if len(rows) < CHUNK_SIZE:
            return
        last_id = rows[-1].label_id


def write_notes(session: Session, out: TextIO, label_filter: ExportFilter) -> int:
    """Write the selected notes to ``out`` as JSONL; returns how many."""
    count = 0
    for note in iter_notes(session, label_filter):
        out.write(note.line())
        out.write("\n")
        count += 1
    return count
