"""Bad input: reported as FILE:LINE, exit status 1, and nothing written."""

from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner

from app.cli import cli
from app.models import Label, Problem, Solution, StepCompletion, User
from tests import factories

runner = CliRunner()


def count_rows(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {
            model.__tablename__: connection.scalar(select(func.count()).select_from(model)) or 0
            for model in (Label, StepCompletion, Problem, Solution, User)
        }


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines))
    return path


def good_lines(count: int) -> list[str]:
    return [factories.line(r) for r in factories.edge_case_records()[:count]]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"labeler": "e90a38f3-3135-4465-87af-3e6322e3d772", "timestamp": \n', "invalid JSON"),
        ("[1, 2]\n", "Input should be an object"),
        (
            factories.line({**factories.record(), "labeler": "nobody"}),
            "labeler: String should match",
        ),
        (
            factories.line(factories.record(finish_reason="done")),
            "label.finish_reason: Input should be",
        ),
        (
            factories.line(factories.record(steps=[factories.step(factories.completion("x", 2))])),
            "label.steps.0.completions.0.rating: Input should be less than or equal to 1",
        ),
        (
            factories.line(
                factories.record(steps=[factories.step(factories.completion("x"), chosen=3)])
            ),
            "chosen_completion 3 is out of range",
        ),
        (
            factories.line({**factories.record(), "question": {"problem": "p", "extra": 1}}),
            "question.ground_truth_answer: Field required",
        ),
    ],
)
def test_a_bad_line_in_the_middle_is_reported_and_nothing_is_written(
    tmp_path: Path, engine: Engine, bad_line: str, message: str
) -> None:
    lines = good_lines(4)
    path = write_lines(tmp_path / "labels.jsonl", [*lines[:2], bad_line, *lines[2:]])
    result = runner.invoke(cli, ["import", "prm800k", str(path)])
    assert result.exit_code == 1
    assert f"{path}:3: " in result.stderr
    assert message in result.stderr
    assert "nothing was imported" in result.stderr
    assert set(count_rows(engine).values()) == {0}


def test_skip_invalid_reports_and_imports_the_rest(tmp_path: Path, engine: Engine) -> None:
    lines = good_lines(4)
    path = write_lines(tmp_path / "labels.jsonl", [lines[0], "not json\n", *lines[1:]])
    result = runner.invoke(cli, ["import", "prm800k", "--skip-invalid", str(path)])
    assert result.exit_code == 0, result.output
    assert f"{path}:2: invalid JSON" in result.stderr
    assert "4 labels added" in result.stdout
    assert "1 invalid skipped" in result.stdout
    assert count_rows(engine)["labels"] == 4


def test_bad_utf8_is_a_line_error(tmp_path: Path, engine: Engine) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_bytes(good_lines(1)[0].encode() + b'{"labeler": "\xff"}\n')
    result = runner.invoke(cli, ["import", "prm800k", str(path)])
    assert result.exit_code == 1
    assert f"{path}:2: not UTF-8 text" in result.stderr
    assert count_rows(engine)["labels"] == 0


def test_error_in_second_file_writes_nothing_from_the_first(tmp_path: Path, engine: Engine) -> None:
    first = write_lines(tmp_path / "a.jsonl", good_lines(3))
    second = write_lines(tmp_path / "b.jsonl", ["{}\n"])
    result = runner.invoke(cli, ["import", "prm800k", str(first), str(second)])
    assert result.exit_code == 1
    assert f"{second}:1: labeler: Field required" in result.stderr
    assert set(count_rows(engine).values()) == {0}


def test_missing_file_is_reported(tmp_path: Path, engine: Engine) -> None:
    result = runner.invoke(cli, ["import", "problems", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 1
    assert "nope.jsonl: cannot open: No such file or directory" in result.stderr


def test_blank_lines_are_ignored_but_counted_in_line_numbers(
    tmp_path: Path, engine: Engine
) -> None:
    path = write_lines(tmp_path / "labels.jsonl", [good_lines(1)[0], "\n", "   \n", "{}\n"])
    result = runner.invoke(cli, ["import", "prm800k", str(path)])
    assert f"{path}:4: " in result.stderr
