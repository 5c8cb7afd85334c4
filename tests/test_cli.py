"""The command line, end to end on a migrated database."""

import gc
import json
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app import prm800k
from app.auth.users import verify_password
from app.cli import GENERATION_BOUNDS, RoleName, cli
from app.columns import integer_bounds
from app.core.config import get_settings
from app.datasets import importing
from app.models import SOLUTIONS, Label, LabelStep, Problem, Role, Solution, StepCompletion, User
from tests import factories

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
HEAVY = {
    "alembic",
    "fastapi",
    "jinja2",
    "math_verify",
    "numpy",
    "pydantic",
    "pydantic_settings",
    "sqlalchemy",
    "starlette",
    "torch",
    "transformers",
}
"""What `steplabel --help` took 0.8 s to load (SQLAlchemy's ORM and the models, FastAPI
through app.core.db, pydantic-settings, numpy); without them it takes about 0.1 s."""


def test_help_loads_none_of_the_heavy_modules() -> None:
    code = (
        "import sys, app.cli\n"
        "sys.argv = ['steplabel', '--help']\n"
        "try:\n    app.cli.main()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert "Usage: steplabel" in result.stdout
    assert HEAVY & set(result.stdout.split()) == set()


def test_the_options_spell_the_tables_values() -> None:
    assert [role.value for role in RoleName] == [role.value for role in Role]
    assert integer_bounds(SOLUTIONS.c.generation) == GENERATION_BOUNDS


def test_an_import_runs_with_the_garbage_collector_paused(
    tmp_path: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    collecting = []

    def import_nothing(*_args: Any, **_options: Any) -> importing.ImportSummary:
        collecting.append(gc.isenabled())
        return importing.ImportSummary("labels")

    monkeypatch.setattr(importing, "import_prm800k", import_nothing)
    source = tmp_path / "labels.jsonl"
    source.write_text("")
    result = runner.invoke(cli, ["import", "prm800k", str(source)])
    assert result.exit_code == 0, result.output
    assert collecting == [False] and gc.isenabled()


def test_import_then_export_to_file_and_stdout(tmp_path: Path, engine: Engine) -> None:
    source = tmp_path / "labels.jsonl"
    source.write_text("".join(factories.line(r) for r in factories.edge_case_records()))
    imported = runner.invoke(cli, ["import", "prm800k", str(source)])
    assert imported.exit_code == 0, imported.output
    assert "10 labels added" in imported.stdout

    target = tmp_path / "out" / "export.jsonl"
    exported = runner.invoke(cli, ["export", "--format", "prm800k", "--output", str(target)])
    assert exported.exit_code == 0, exported.output
    assert target.read_bytes() == source.read_bytes()
    assert "wrote 10 lines" in exported.stderr and str(target) in exported.stderr

    to_stdout = runner.invoke(cli, ["export", "-o", "-", "--generation", "-1"])
    assert to_stdout.exit_code == 0
    lines = to_stdout.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["is_initial_screening_question"] is True

    trl = runner.invoke(cli, ["export", "--format", "trl", "-o", "-", "--exclude-screening"])
    rows = [json.loads(line) for line in trl.stdout.splitlines()]
    assert rows and all(set(row) == {"prompt", "completions", "labels"} for row in rows)
    assert all(len(row["completions"]) == len(row["labels"]) for row in rows)


def test_an_unknown_labeler_is_refused_before_anything_is_written(
    tmp_path: Path, engine: Engine
) -> None:
    runner.invoke(cli, ["seed-demo", "--credentials", str(tmp_path / "creds.txt")])
    target = tmp_path / "export.jsonl"

    typo = runner.invoke(
        cli, ["export", "-o", str(target), "--labeler", "admin", "--labeler", "nobody"]
    )

    assert typo.exit_code == 2
    assert "--labeler: no user has the name or UUID 'nobody'" in typo.stderr
    assert not target.exists()
    known = runner.invoke(cli, ["export", "-o", str(target), "--labeler", "admin"])
    assert known.exit_code == 0 and "wrote 2 lines" in known.stderr  # the gold labels


def test_an_output_that_cannot_be_written_is_one_line(tmp_path: Path, engine: Engine) -> None:
    folder = runner.invoke(cli, ["export", "-o", str(tmp_path)])
    assert folder.exit_code == 1
    assert folder.stderr.strip() == f"cannot write {tmp_path}: Is a directory"
    (tmp_path / "file").write_text("")
    beneath_a_file = runner.invoke(cli, ["export", "-o", str(tmp_path / "file" / "x.jsonl")])
    assert beneath_a_file.exit_code == 1 and "Traceback" not in beneath_a_file.output
    assert beneath_a_file.stderr.startswith(f"cannot write {tmp_path / 'file' / 'x.jsonl'}: ")


def test_migrate_says_which_database_it_cannot_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/no-such-folder/steplabel.db"
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        result = runner.invoke(cli, ["migrate"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip() == f"cannot open the database {url}: unable to open database file"


def test_commands_say_which_database_they_cannot_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/no-such-folder/steplabel.db"
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", url)
    source = tmp_path / "labels.jsonl"
    source.write_text(factories.line(factories.record()))
    get_settings.cache_clear()
    try:
        results = [
            runner.invoke(cli, args)
            for args in (
                ["export", "-o", "-"],
                ["users", "list"],
                ["import", "prm800k", str(source)],
            )
        ]
    finally:
        get_settings.cache_clear()
    for result in results:
        assert result.exit_code == 2 and "Traceback" not in result.output
        expected = f"cannot open the database {url}: unable to open database file"
        assert result.stderr.strip() == expected
    assert not (tmp_path / "no-such-folder").exists()


def test_unknown_format_is_refused(engine: Engine) -> None:
    result = runner.invoke(cli, ["export", "--format", "csv", "-o", "-"])
    assert result.exit_code == 2
    assert "--format must be one of prm800k, trl" in result.stderr


def test_seed_demo_creates_users_and_data_once(tmp_path: Path, engine: Engine) -> None:
    credentials = tmp_path / "creds.txt"
    first = runner.invoke(cli, ["seed-demo", "--credentials", str(credentials)])
    assert first.exit_code == 0, first.output
    rows = [line.split("\t") for line in credentials.read_text().splitlines()[1:]]
    assert [(name, role) for name, role, _ in rows] == [
        ("admin", "admin"),
        ("alice", "labeler"),
        ("bob", "labeler"),
    ]
    assert credentials.stat().st_mode & 0o777 == 0o600
    with Session(engine) as session:
        for name, _, password in rows:
            assert password in first.stdout
            user = session.scalars(select(User).where(User.name == name)).one()
            assert user.is_active and user.is_approved
            assert verify_password(user.password_hash, password)
        problems = session.scalar(select(func.count()).select_from(Problem))
        solutions = session.scalar(select(func.count()).select_from(Solution))
        queued = session.scalar(
            select(func.count()).select_from(Solution).where(Solution.queue_state == "open")
        )
    assert problems and queued and solutions and solutions > queued > problems
    pool = solutions - queued
    assert f"{problems} problems, {queued} solutions to label (the first 12 by both" in (
        first.stdout
    )
    assert f"2 quality-control questions with the admin's gold labels), {pool} more" in (
        first.stdout
    )

    second = runner.invoke(cli, ["seed-demo", "--credentials", str(credentials)])
    assert second.exit_code == 0 and "already seeded" in second.stdout
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Solution)) == solutions
        assert session.scalar(select(func.count()).select_from(Label)) == 2  # the gold ones


def test_labels_made_in_the_app_export_through_the_same_code(
    engine: Engine, tmp_path: Path
) -> None:
    runner.invoke(cli, ["seed-demo", "--credentials", str(tmp_path / "creds.txt")])
    with Session(engine) as session:
        labeler_uuid = _label_first_demo_solution(session)
    result = runner.invoke(cli, ["export", "-o", "-"])
    records = [prm800k.parse_line(line) for line in result.stdout.splitlines()]
    # The demo admin's gold labels are exported too.
    (record,) = [record for record in records if record.labeler == labeler_uuid]
    with Session(engine) as session:
        solution = session.scalars(select(Solution).order_by(Solution.id)).first()
        assert solution is not None
        assert isinstance(record.question, prm800k.Phase2Question)
        assert record.question.pre_generated_steps == solution.steps
        assert record.question.pre_generated_answer == solution.answer
        assert record.question.problem == solution.problem.text
    assert record.timestamp == datetime(2026, 11, 22, 9, 30, 0, 123456)
    assert [s.completions[0].rating for s in record.label.steps] == [1, -1]
    assert record.label.steps[1].chosen_completion is None
    assert record.label.finish_reason == "found_error"


def _label_first_demo_solution(session: Session) -> str:
    """Store a label as the labeling pages will, with ORM objects; returns the labeler UUID."""
    solution = session.scalars(select(Solution).order_by(Solution.id)).first()
    assert solution is not None and solution.steps
    labeler = session.scalars(select(User).where(User.role == Role.LABELER.value)).first()
    assert labeler is not None
    label = Label(
        dedupe_key="app-label-1",
        labeler_id=labeler.id,
        problem_id=solution.problem_id,
        solution_id=solution.id,
        timestamp=datetime(2026, 11, 22, 9, 30, 0, 123456),
        generation=0,
        total_time=61234,
        finish_reason="found_error",
        steps=[
            LabelStep(
                step_index=index,
                chosen_completion=None if index == 1 else 0,
                completions=[
                    StepCompletion(completion_index=0, text=text, rating=-1 if index else 1)
                ],
            )
            for index, text in enumerate(solution.steps[:2])
        ],
    )
    session.add(label)
    session.commit()
    return labeler.uuid


def test_commands_on_an_unmigrated_database_say_to_migrate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / "empty.db"
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", f"sqlite:///{database}")
    source = tmp_path / "labels.jsonl"
    source.write_text(factories.line(factories.record()))
    commands = (["import", "prm800k", str(source)], ["export", "-o", "-"], ["seed-demo"])
    for args in commands:
        result = runner.invoke(cli, args)
        assert result.exit_code == 2
        assert f"there is no database file {database}: run `steplabel migrate`" in result.stderr
    assert not database.exists()  # a mistyped path leaves no empty file behind
    sqlite3.connect(database).close()
    for args in commands:
        result = runner.invoke(cli, args)
        assert result.exit_code == 2
        assert "has no steplabel schema" in result.stderr
        assert "steplabel migrate" in result.stderr
    assert runner.invoke(cli, ["migrate"]).exit_code == 0
    assert runner.invoke(cli, ["import", "prm800k", str(source)]).exit_code == 0


def test_an_infinite_score_stored_before_imports_refused_it_stops_the_export(
    engine: Engine,
) -> None:
    # Every export is strict JSON: one that would need Infinity stops, with a message.
    with Session(engine) as session:
        solution = factories.make_solution(session)
        solution.verifier_score = float("inf")
        factories.make_label(session, factories.make_user(session, "old"), solution, [[1]])
        session.commit()
    result = runner.invoke(cli, ["export", "-o", "-"])
    assert isinstance(result.exception, SystemExit)
    assert result.exit_code == 1
    assert "holds a NaN or infinite score, which JSON cannot write" in result.stderr
    assert "Infinity" not in result.stdout


def test_export_consensus_writes_one_line_per_solution(tmp_path: Path, engine: Engine) -> None:
    question = factories.phase2_question()
    steps = [
        factories.step(factories.completion("Add.")),
        factories.step(factories.completion("$2+3=5$.\n\n# Answer\n\n5")),
    ]
    source = tmp_path / "labels.jsonl"
    source.write_text(
        factories.line(factories.record(question, steps))
        + factories.line(
            factories.record(
                question, steps, labeler=factories.LABELER_B, timestamp="2022-11-23T10:00:00"
            )
        )
    )
    assert runner.invoke(cli, ["import", "prm800k", str(source)]).exit_code == 0

    exported = runner.invoke(cli, ["export", "--consensus", "-o", "-"])
    assert exported.exit_code == 0, exported.output
    (line,) = [json.loads(text) for text in exported.stdout.splitlines()]
    assert line["steplabel_consensus"]["method"] == "unanimous"
    assert [entry["labeler"] for entry in line["steplabel_consensus"]["labels"]] == [
        factories.LABELER_A,
        factories.LABELER_B,
    ]
    assert line["timestamp"] == "2022-11-23T10:00:00"
    assert "wrote 1 lines (1 unanimous); left out: 0 awaiting adjudication" in exported.stderr

    trl = runner.invoke(cli, ["export", "--consensus", "--format", "trl", "-o", "-"])
    assert trl.exit_code == 2 and "--consensus writes PRM800K lines" in trl.stderr
