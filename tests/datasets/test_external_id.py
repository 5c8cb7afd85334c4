"""A solution's ``external_id`` comes back with its labels as a last, extra key of the
PRM800K line, and only there: other lines stay PRM800K's bytes, and import reads it back."""

import io
import json

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import prm800k
from app.datasets.export import ExportFilter, line_chunk, write_export
from app.datasets.importing import import_prm800k, import_solutions
from app.datasets.reading import ImportLineError, read_jsonl
from app.models import Solution
from tests import factories
from tests.factories import make_label, make_solution, make_user


def _lines(*records: dict[str, object]) -> io.BytesIO:
    return io.BytesIO("".join(json.dumps(r) + "\n" for r in records).encode())


def _export(session: Session) -> list[str]:
    out = io.StringIO()
    write_export(session, out, ExportFilter())
    return out.getvalue().splitlines()


def test_the_side_field_is_last_and_only_where_there_is_an_id(session: Session) -> None:
    import_solutions(
        session,
        read_jsonl(
            "s.jsonl", _lines({"problem": "What is 3+4?", "steps": ["7"], "external_id": "run7-1"})
        ),
    )
    tagged = session.scalars(select(Solution).where(Solution.source_id == "run7-1")).one()
    plain = make_solution(session)
    labeler = make_user(session, "lab")
    make_label(session, labeler, tagged, [[1]])
    make_label(session, labeler, plain, [[1], [1]])
    with_id, without = _export(session)
    assert list(json.loads(with_id))[-1] == "external_id"
    assert json.loads(with_id)["external_id"] == "run7-1"
    assert "external_id" not in json.loads(without)
    for line in (with_id, without):
        record = prm800k.parse_line(line)
        assert prm800k.dumps(record.model_dump(mode="json")) == line
        assert prm800k.export_difference(record, json.loads(line)) is None


def test_import_reads_the_side_field_back(session: Session) -> None:
    labeler = make_user(session, "lab")
    solution = make_solution(session)
    solution.source_id = "gen-42"
    make_label(session, labeler, solution, [[1], [-1]], finish_reason="found_error")
    [line] = _export(session)
    record = json.loads(line)
    record["question"]["problem"] = "Another problem, so that the import adds a solution"
    import_prm800k(session, read_jsonl("l.jsonl", _lines(record)))
    assert session.scalars(select(Solution.source_id).order_by(Solution.id)).all() == [
        "gen-42",
        "gen-42",
    ]


def test_a_solution_stored_under_another_id_keeps_it_and_the_summary_says_so(
    session: Session,
) -> None:
    """Samples of one problem are often the same text: the first line's id stays with the
    solution, and the summary counts the ids that could not be kept, none silently."""
    same = {"problem": "What is 2+2?", "steps": ["4"]}
    first = import_solutions(
        session,
        read_jsonl(
            "a.jsonl", _lines({**same, "external_id": "s-1"}, {**same, "external_id": "s-2"})
        ),
    )
    again = import_solutions(
        session,
        read_jsonl(
            "b.jsonl", _lines({**same, "external_id": "s-1"}, {**same, "external_id": "s-3"}, same)
        ),
    )
    assert session.scalars(select(Solution.source_id)).all() == ["s-1"]
    assert (first.external_ids_not_kept, again.external_ids_not_kept) == (1, 1)
    assert first.describe() == (
        "2 lines read: 1 solutions added, 1 already present, 0 invalid skipped (1 new problems, "
        "1 external ids not kept: their solution is stored under another)"
    )


def test_two_different_ids_for_one_solution_are_refused(session: Session) -> None:
    line = {"problem": "What is 1+1?", "steps": ["2"], "id": "a", "external_id": "b"}
    with pytest.raises(ImportLineError, match="'id' and 'external_id' differ"):
        import_solutions(session, read_jsonl("s.jsonl", _lines(line)))


def test_a_phase1_lines_id_survives_an_import_into_an_empty_database(session: Session) -> None:
    """A phase-1 line names no solution to keep its id: the label keeps it, so an export
    read back into an empty database (README, "Backups") exports the same bytes."""
    phase1 = factories.record(
        factories.phase1_question(),
        [factories.step(factories.completion("$2+3=5$.", 1))],
    )
    phase2 = factories.record()
    records = [
        {**phase1, "external_id": "p1-a"},
        phase2,
        {**phase1, "labeler": factories.LABELER_B},
    ]
    lines = [prm800k.dumps(record) + "\n" for record in records]
    import_prm800k(session, read_jsonl("l.jsonl", io.BytesIO("".join(lines).encode())))
    assert session.scalars(select(Solution)).all() != []  # the phase-2 line's
    assert _export(session) == [line.rstrip("\n") for line in lines]
    _, text = line_chunk(session, ExportFilter(), 0)
    assert text == "".join(lines)
