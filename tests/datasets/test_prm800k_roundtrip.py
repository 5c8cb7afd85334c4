"""Importing PRM800K lines and exporting them gives back the same bytes, on both databases."""

import io
import json
from datetime import UTC, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app import prm800k
from app.core.db import transaction
from app.datasets.demo_seed import seed
from app.datasets.export import ExportFilter, iter_records, write_export
from app.datasets.importing import import_prm800k
from app.datasets.reading import ImportLineError, read_files, read_jsonl
from app.models import Label, LabelStep, Problem, Solution, StepCompletion, User
from tests import factories
from tests.worker.test_cycle import label_queued


def import_text(session: Session, text: str, name: str = "input.jsonl") -> None:
    import_prm800k(session, read_jsonl(name, io.BytesIO(text.encode())))


def export_text(
    session: Session, label_filter: ExportFilter | None = None, fmt: str = "prm800k"
) -> str:
    out = io.StringIO()
    write_export(session, out, label_filter or ExportFilter(), fmt)
    return out.getvalue()


def edge_case_text() -> str:
    records = factories.edge_case_records()
    null_steps = factories.record(factories.phase2_question("Null steps?"))
    null_steps["question"]["pre_generated_steps"] = None
    records.append(null_steps)
    return "".join(factories.line(r) for r in records)


def test_real_lines_round_trip_byte_for_byte(session: Session, shared_data: Path) -> None:
    original = (shared_data / "prm800k_raw_samples.jsonl").read_text()
    import_prm800k(session, read_files([shared_data / "prm800k_raw_samples.jsonl"]))
    assert export_text(session) == original


def test_a_labeler_uuid_in_capitals_is_the_same_labeler(
    session: Session, shared_data: Path
) -> None:
    """One labeler written in both cases is one user (else agreement would pair them as
    two), whose UUID exports in lowercase, as PRM800K writes them."""
    first, second = (shared_data / "prm800k_raw_samples.jsonl").read_text().splitlines()[:2]
    labeler = json.loads(first)["labeler"]
    capitals = prm800k.dumps(json.loads(second) | {"labeler": labeler.upper()})
    import_text(session, first + "\n" + capitals + "\n")
    assert session.scalars(select(User.uuid)).all() == [labeler]
    assert export_text(session).splitlines() == [first, capitals.replace(labeler.upper(), labeler)]


def give_up_line(shared_data: Path) -> str:
    """Issue 16's case: a real phase-1 label, given up at a step with null completions."""
    lines = (shared_data / "prm800k_raw_samples.jsonl").read_text().splitlines()
    record = json.loads(lines[3])
    no_completions = {"completions": None, "human_completion": None, "chosen_completion": None}
    record["label"]["steps"].append(no_completions)
    record["label"]["finish_reason"] = "give_up"
    return json.dumps(record) + "\n"


def test_a_step_with_null_completions_round_trips(session: Session, shared_data: Path) -> None:
    text = give_up_line(shared_data)
    import_text(session, text)
    assert export_text(session) == text
    last = session.scalars(select(LabelStep).order_by(LabelStep.step_index.desc())).first()
    assert last is not None and last.step_index == 7 and last.completions == []
    trl = json.loads(export_text(session, fmt="trl"))
    assert len(trl["completions"]) == len(trl["labels"]) == 7


def test_an_empty_list_of_completions_is_refused(session: Session) -> None:
    # Stored as no rows, it could not be told from null, and would export as null.
    text = factories.line(factories.record(steps=[factories.step(chosen=None)]))
    with pytest.raises(ImportLineError, match=r"^input.jsonl:1: label.steps.0.completions: "):
        import_text(session, text)


def test_a_human_completion_keeps_its_key_order(session: Session) -> None:
    human = {"corrected_rating": 1, **factories.human_completion("$3x=15$")}
    wrong = factories.completion("$3x = 29$", -1, False)
    text = factories.line(factories.record(steps=[factories.step(wrong, human=human, chosen=None)]))
    import_text(session, text)
    assert export_text(session) == text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda r: r["label"].update(steps=r["label"].pop("steps")),
            "label.steps: out of order; export writes steps, total_time, finish_reason",
        ),
        (
            lambda r: r.update(timestamp="2022-11-22T16:51:29.98"),
            'timestamp: "2022-11-22T16:51:29.98" would be exported as "2022-11-22T16:51:29.980000"',
        ),
        (
            lambda r: r["question"].update(pre_generated_verifier_score=1),
            "question.pre_generated_verifier_score: 1 would be exported as 1.0",
        ),
        (
            lambda r: r["question"].update(pre_generated_verifier_score=-0.0),
            "question.pre_generated_verifier_score: -0.0 would be exported as 0.0",
        ),
    ],
)
def test_a_line_export_would_not_give_back_is_refused(
    session: Session, change: Any, message: str
) -> None:
    record = factories.record()
    change(record)
    with pytest.raises(ImportLineError) as refused:
        import_text(session, factories.line(record))
    assert str(refused.value) == f"input.jsonl:1: {message}"
    assert session.scalar(select(func.count()).select_from(Label)) == 0


def test_json_written_another_way_exports_as_prm800k_writes_it(session: Session) -> None:
    record = factories.edge_case_records()[8]
    import_text(session, json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    assert export_text(session) == factories.line(record)


def test_edge_cases_round_trip_byte_for_byte(session: Session) -> None:
    text = edge_case_text()
    import_text(session, text)
    exported = export_text(session)
    assert exported.splitlines() == text.splitlines()
    assert exported == text


def test_round_trip_keeps_import_order_across_files(session: Session, tmp_path: Path) -> None:
    lines = edge_case_text().splitlines(keepends=True)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(lines[5:]))
    second.write_text("".join(lines[:5]))
    import_prm800k(session, read_files([first, second]))
    assert export_text(session) == "".join(lines[5:] + lines[:5])


def test_reimport_adds_nothing(session: Session) -> None:
    text = edge_case_text()
    import_text(session, text)
    counts = [session.scalar(select(func.count()).select_from(t)) for t in TABLES]
    summary = import_prm800k(session, read_jsonl("again", io.BytesIO(text.encode())))
    assert summary.added == 0
    assert summary.already_present == len(text.splitlines())
    assert [session.scalar(select(func.count()).select_from(t)) for t in TABLES] == counts
    assert export_text(session) == text


def test_labels_made_in_the_app_come_back_from_an_export_as_already_present(
    engine: Engine,
) -> None:
    """A label made in the app is stored under its task's key; imported back from an
    export, it is matched by its content, as an imported label is, and adds nothing: the
    demo's phase-1 tasks (their lines name no solution) and phase-2 ones alike."""
    with transaction(engine) as session:
        seed(session)
    assert label_queued(engine, limit=10, labelers=("alice", "bob")) == 10
    with Session(engine) as session:
        text = export_text(session)
        assert {json.loads(line)["generation"] for line in text.splitlines()} >= {None, 0}
        counts = [session.scalar(select(func.count()).select_from(t)) for t in TABLES]

        summary = import_prm800k(session, read_jsonl("export.jsonl", io.BytesIO(text.encode())))
        session.commit()

        assert (summary.added, summary.already_present) == (0, len(text.splitlines()))
        assert [session.scalar(select(func.count()).select_from(t)) for t in TABLES] == counts
        assert export_text(session) == text


TABLES = [Label, LabelStep, StepCompletion, Problem, Solution, User]


def test_import_stores_queryable_rows(session: Session) -> None:
    import_text(session, edge_case_text())
    # Two labelers labeled the same pre-generated solution: one solution row, two labels.
    q2_problem = "Find $x$ if $3x+7=22$."
    solutions = session.scalars(
        select(Solution).join(Problem).where(Problem.text == q2_problem)
    ).all()
    assert len(solutions) == 1
    assert solutions[0].steps == ["Subtract 7: $3x=15$.", "Divide: $x=5$.\n\n# Answer\n\n5"]
    assert solutions[0].verifier_score == 0.25
    assert solutions[0].generation == 6
    # The phase-1 line about the same problem and answer reuses the phase-2 problem row.
    problem_rows = session.scalars(select(Problem).where(Problem.text == q2_problem)).all()
    assert len(problem_rows) == 1
    phase1 = session.scalars(
        select(Label).where(Label.solution_id.is_(None), Label.problem_id == problem_rows[0].id)
    ).one()
    human = session.get(LabelStep, (phase1.id, 1))
    assert human is not None and human.human_completion is not None
    assert human.human_completion["text"] == "$3x=15$"
    assert human.human_completion["corrected_rating"] == 1
    negatives = session.scalar(
        select(func.count()).select_from(StepCompletion).where(StepCompletion.rating == -1)
    )
    assert negatives == edge_case_text().count('"rating": -1')
    # Unknown labelers become inactive users whose UUID is the exported labeler.
    labelers = session.scalars(select(User)).all()
    assert {u.uuid for u in labelers} == {factories.LABELER_A, factories.LABELER_B}
    assert not any(u.is_active for u in labelers)


def test_export_filters(session: Session) -> None:
    text = edge_case_text()
    import_text(session, text)
    records = [prm800k.parse_line(line) for line in text.splitlines()]

    def exported(label_filter: ExportFilter) -> list[str]:
        return export_text(session, label_filter).splitlines()

    def expected(keep: object) -> list[str]:
        return [line for line, r in zip(text.splitlines(), records, strict=True) if keep(r)]  # type: ignore[operator]

    assert exported(ExportFilter(generations=[6])) == expected(lambda r: r.generation == 6)
    assert exported(ExportFilter(generations=[-1, 6])) == expected(
        lambda r: r.generation in (-1, 6)
    )
    assert exported(ExportFilter(labelers=[factories.LABELER_B])) == expected(
        lambda r: r.labeler == factories.LABELER_B
    )
    assert exported(ExportFilter(include_quality_control=False)) == expected(
        lambda r: not r.is_quality_control_question
    )
    assert exported(ExportFilter(include_screening=False)) == expected(
        lambda r: not r.is_initial_screening_question
    )
    since = records[3].timestamp
    assert exported(ExportFilter(since=since)) == expected(lambda r: r.timestamp >= since)
    assert len(exported(ExportFilter(since=since))) == 1
    # The same moment five hours behind UTC, and a minute after it with an offset.
    behind = since.replace(tzinfo=UTC).astimezone(timezone(timedelta(hours=-5)))
    assert exported(ExportFilter(since=behind)) == exported(ExportFilter(since=since))
    assert exported(ExportFilter(since=behind + timedelta(minutes=1))) == []


def test_exported_records_validate_against_the_schema(session: Session) -> None:
    import_text(session, edge_case_text())
    for record in iter_records(session, ExportFilter()):
        model = prm800k.Record.model_validate_json(prm800k.dumps(record))
        assert prm800k.dumps(model.model_dump(mode="json")) == prm800k.dumps(record)


def test_export_streams_in_chunks(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    import_text(session, edge_case_text())
    monkeypatch.setattr("app.datasets.export.CHUNK_SIZE", 3)
    records = iter_records(session, ExportFilter())
    first = next(records)
    # Only the first chunk has been read: a later label deleted now is not exported.
    session.execute(
        Label.__table__.delete().where(Label.id == session.scalar(select(func.max(Label.id))))
    )
    rest = list(records)
    assert first["labeler"] == factories.LABELER_A
    assert len(rest) == len(edge_case_text().splitlines()) - 2


def test_trl_rows_follow_the_labelers_path(session: Session) -> None:
    records = factories.edge_case_records()
    import_text(session, "".join(factories.line(r) for r in records[:2] + records[5:6]))
    exported = [json.loads(x) for x in export_text(session, fmt="trl").splitlines()]
    assert exported[0] == {
        "prompt": "Find $x$ if $3x+7=22$.",
        "completions": ["Subtract 7: $3x=15$.", "Divide: $x=5$.\n\n# Answer\n\n5"],
        "labels": [True, True],
    }
    assert exported[1]["completions"] == ["Subtract 7: $3x=15$.", "Divide: $x=6$."]
    assert exported[1]["labels"] == [True, False]
    assert exported[2]["completions"] == ["Let's subtract.", "$3x=15$", "$x=5$\n\n# Answer\n\n5"]
    assert exported[2]["labels"] == [True, True, True]
