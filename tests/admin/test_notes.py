"""Give-up and bad-problem notes: the paged list, the admin page, its download and the
command line's ``export --format notes``."""

import json
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.admin.notes import iter_notes, notes_page
from app.cli import cli
from app.core.db import transaction
from app.datasets.export import ExportFilter
from app.models import User
from tests.admin.conftest import HTMX, Admin
from tests.factories import make_label, make_solution, make_user

NOW = datetime(2026, 5, 4, 12, 0, 0)
HOSTILE_NOTE = "<script>alert('note')</script>"


def build(session: Session) -> dict[str, User]:
    """Five notes (three give-ups, two bad problems, by ann and bob), a label without a
    note and a give-up whose note is empty."""
    ann, bob = make_user(session, "ann"), make_user(session, "bob")
    for minutes, (labeler, reason, note) in enumerate(
        [
            (ann, "give_up", "too long"),
            (bob, "bad_problem", "the answer key is wrong"),
            (ann, "give_up", HOSTILE_NOTE),
            (bob, "give_up", "ünïcode ∑ note"),
            (ann, "bad_problem", "two questions in one"),
            (ann, "give_up", ""),
            (bob, "solution", None),
        ]
    ):
        make_label(
            session,
            labeler,
            make_solution(session, generation=minutes % 2),
            [] if reason != "solution" else [[1], [1]],
            finish_reason=reason,
            note=note,
            timestamp=NOW - timedelta(minutes=minutes),
        )
    return {"ann": ann, "bob": bob}


def test_a_page_lists_notes_newest_first_and_filters_by_reason(session: Session) -> None:
    build(session)
    first = notes_page(session, per_page=2)
    assert (first.total, first.page_count, first.page) == (5, 3, 1)
    assert [n.note for n in first.notes] == ["too long", "the answer key is wrong"]
    last = notes_page(session, page=99, per_page=2)
    assert last.page == 3 and [n.note for n in last.notes] == ["two questions in one"]
    bad = notes_page(session, "bad_problem")
    assert [(n.labeler_name, n.finish_reason) for n in bad.notes] == [
        ("bob", "bad_problem"),
        ("ann", "bad_problem"),
    ]


def test_the_export_carries_each_note_with_its_label_keys(session: Session) -> None:
    users = build(session)
    notes = list(iter_notes(session, ExportFilter(labelers=["bob"])))
    assert [n.note for n in notes] == ["the answer key is wrong", "ünïcode ∑ note"]
    record = json.loads(notes[1].line())
    assert record["labeler"] == users["bob"].uuid
    assert record["timestamp"] == (NOW - timedelta(minutes=3)).isoformat()
    assert record["finish_reason"] == "give_up" and record["generation"] == 1
    assert "ünïcode ∑ note" in notes[1].line()  # written as text, not \u escapes
    only_generation_0 = iter_notes(session, ExportFilter(generations=[0]))
    assert [n.note for n in only_generation_0] == ["too long", HOSTILE_NOTE, "two questions in one"]


def test_the_notes_page_shows_escaped_notes_and_downloads_them(
    admin: Admin, engine: Engine
) -> None:
    with transaction(engine) as session:
        build(session)
    page = admin.client.get("/admin/notes")
    assert page.status_code == 200
    assert "5 notes." in page.text and "the answer key is wrong" in page.text
    assert HOSTILE_NOTE not in page.text and "&lt;script&gt;" in page.text
    assert 'href="/admin/notes.jsonl"' in page.text
    fragment = admin.client.get("/admin/notes?reason=bad_problem", headers=HTMX)
    assert fragment.text.lstrip().startswith('<div id="note-table">')
    assert "two questions in one" in fragment.text and "too long" not in fragment.text
    assert admin.client.get("/admin/notes?reason=solution").status_code == 422

    download = admin.client.get("/admin/notes.jsonl")
    assert download.status_code == 200
    assert download.headers["content-type"].startswith("application/x-ndjson")
    assert "attachment" in download.headers["content-disposition"]
    lines = [json.loads(line) for line in download.text.splitlines()]
    assert [line["note"] for line in lines][:2] == ["too long", "the answer key is wrong"]
    assert len(lines) == 5


def test_export_format_notes_writes_the_notes_file(engine: Engine) -> None:
    with transaction(engine) as session:
        build(session)
    result = CliRunner().invoke(cli, ["export", "--format", "notes", "-o", "-", "--labeler", "ann"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["note"] for line in lines] == ["too long", HOSTILE_NOTE, "two questions in one"]
    assert "wrote 3 notes" in result.stderr
