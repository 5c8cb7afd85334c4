"""Bad input: reported as FILE:LINE, exit status 1, and nothing written."""

import codecs
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner

from app.cli import cli
from app.datasets import reading
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
        (
            '{"labeler": "e90a38f3-3135-4465-87af-3e6322e3d772", "timestamp": \n',
            "the line is not complete JSON: it ends inside a value",
        ),
        ("[1, 2]\n", "expected a JSON object, got list"),
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


def test_a_byte_order_mark_at_the_start_is_no_error(tmp_path: Path, engine: Engine) -> None:
    lines = good_lines(2)
    path = tmp_path / "labels.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + "".join(lines).encode())
    result = runner.invoke(cli, ["import", "prm800k", str(path)])
    assert result.exit_code == 0, result.stderr
    assert count_rows(engine)["labels"] == 2
    out = tmp_path / "export.jsonl"
    assert runner.invoke(cli, ["export", "-o", str(out)]).exit_code == 0
    assert sorted(out.read_text().splitlines(keepends=True)) == sorted(lines)


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


def deeply_nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def with_score(score: str) -> str:
    """A PRM800K line whose verifier score is written as ``score`` (NaN is not JSON)."""
    data = factories.record()
    data["question"]["pre_generated_verifier_score"] = 0.5
    return factories.line(data).replace('"pre_generated_verifier_score": 0.5', score)


GOOD_LINES = {
    "prm800k": good_lines(2),
    "problems": [
        '{"problem": "What is $1+1$?", "answer": "2"}\n',
        '{"problem": "What is $2+2$?", "answer": "4"}\n',
    ],
    "solutions": [
        '{"problem": "What is $1+1$?", "steps": ["Add.", "It is 2."]}\n',
        '{"problem": "What is $2+2$?", "steps": ["Add.", "It is 4."]}\n',
    ],
}


# Issue 16, section 2: each was a traceback (Postgres: a database error), or was stored and
# then failed later (a NUL in step text: that task could never be submitted).
@pytest.mark.parametrize(
    ("kind", "bad_line", "message"),
    [
        (
            "prm800k",
            factories.line(factories.record(steps=[factories.step(factories.completion("a\0b"))])),
            "label.steps.0.completions.0.text: holds a NUL character",
        ),
        ("problems", '{"problem": "x\\u0000", "answer": "1"}\n', "problem: holds a NUL character"),
        ("solutions", '{"problem": "p", "steps": ["a", "b\\u0000"]}\n', "steps.1: holds a NUL"),
        ("problems", '{"problem": "x\\ud800", "answer": "1"}\n', "invalid JSON: "),
        ("solutions", '{"problem": "x\\ud800", "steps": ["a"]}\n', "invalid JSON: "),
        (
            "prm800k",
            factories.line(factories.record(factories.phase2_question("\ud800?"))),
            "invalid JSON: ",
        ),
        (
            "problems",
            f'{{"problem": "p", "answer": "1", "x": {deeply_nested(100_000)}}}\n',
            "invalid JSON: recursion limit exceeded",
        ),
        (
            "solutions",
            f'{{"problem": "p", "steps": ["a"], "x": {deeply_nested(100_000)}}}\n',
            "invalid JSON: recursion limit exceeded",
        ),
        (
            "prm800k",
            factories.line(factories.record(generation=10**11)),
            "generation: Input should be less than or equal to 2147483647",
        ),
        (
            "prm800k",
            factories.line(factories.record(total_time=10**19)),
            "label.total_time: Input should be less than or equal to 9223372036854775807",
        ),
        (
            "prm800k",
            with_score('"pre_generated_verifier_score": NaN'),
            "question.pre_generated_verifier_score: Input should be a finite number",
        ),
        (
            "prm800k",
            with_score('"pre_generated_verifier_score": -Infinity'),
            "question.pre_generated_verifier_score: Input should be a finite number",
        ),
        (
            "prm800k",
            with_score('"pre_generated_verifier_score": 1e400'),
            "question.pre_generated_verifier_score: Input should be a finite number",
        ),
        (
            "solutions",
            '{"problem": "p", "steps": ["a"], "score": Infinity}\n',
            "score: Input should be a finite number",
        ),
        (
            "problems",
            '{"problem": "p", "answer": "1", "subject": "' + "s" * 65 + '"}\n',
            "subject: String should have at most 64 characters",
        ),
        (
            "solutions",
            '{"problem": "p", "steps": ["a"], "generator": "' + "g" * 256 + '"}\n',
            "generator: String should have at most 255 characters",
        ),
        (
            "solutions",
            '{"problem": "p", "steps": ["a"], "id": ' + "9" * 256 + "}\n",
            "id: longer than the 255 characters stored",
        ),
    ],
)
def test_what_a_database_cannot_store_is_a_line_error(
    tmp_path: Path, engine: Engine, kind: str, bad_line: str, message: str
) -> None:
    lines = GOOD_LINES[kind]
    path = write_lines(tmp_path / "input.jsonl", [*lines[:1], bad_line, *lines[1:]])
    result = runner.invoke(cli, ["import", kind, str(path)])
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1
    assert f"{path}:2: {message}" in result.stderr
    assert "nothing was imported" in result.stderr
    assert set(count_rows(engine).values()) == {0}


def test_a_generation_out_of_range_is_refused(tmp_path: Path, engine: Engine) -> None:
    path = write_lines(tmp_path / "solutions.jsonl", GOOD_LINES["solutions"])
    result = runner.invoke(cli, ["import", "solutions", "--generation", "100000000000", str(path)])
    assert result.exit_code == 2
    assert "Invalid value for '--generation'" in result.stderr and "2147483647" in result.stderr
    assert set(count_rows(engine).values()) == {0}


def test_an_empty_file_is_said_to_be_empty(tmp_path: Path, engine: Engine) -> None:
    before = count_rows(engine)
    empty = write_lines(tmp_path / "empty.jsonl", [])

    result = runner.invoke(cli, ["import", "prm800k", str(empty)])

    assert result.exit_code == 0, result.output
    assert "no lines read: the file is empty, no labels added" in result.stdout
    assert count_rows(engine) == before


@pytest.mark.parametrize("kind", ["prm800k", "problems", "solutions"])
def test_a_line_cut_in_half_says_it_is_not_complete_json(
    tmp_path: Path, engine: Engine, kind: str
) -> None:
    """Cut inside a string, the parser meets the line's newline there and called it
    "control character found"; the reader is told what happened instead."""
    whole = {
        "prm800k": factories.line(factories.record()),
        "problems": '{"problem": "What is $1+1$?", "answer": "2", "subject": "Algebra"}\n',
        "solutions": '{"problem": "What is $1+1$? Add the ones, then say it.", "steps": ["2"]}\n',
    }[kind]
    cut = whole[: len(whole) // 2].rstrip() + "\n"
    assert cut.count('"') % 2 == 1, "cut inside a string"
    path = write_lines(tmp_path / f"{kind}.jsonl", [cut])
    result = runner.invoke(cli, ["import", kind, str(path)])
    assert result.exit_code == 1
    assert f"{path}:1: the line is not complete JSON: it ends inside a string" in result.stderr
    assert "control character" not in result.stderr


def test_an_overlong_line_is_a_line_error_and_the_lines_after_it_are_read(
    tmp_path: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line past the cap is never read whole into memory: it is reported by its number
    and skipped to its end, and the next line is read as the next line."""
    lines = good_lines(4)
    cap = max(len(line.encode()) for line in lines) + 100
    monkeypatch.setattr(reading, "MAX_LINE_BYTES", cap, raising=False)
    overlong = '{"labeler": "' + "x" * (3 * cap) + '"}\n'
    path = write_lines(tmp_path / "labels.jsonl", [lines[0], overlong, *lines[1:]])
    with open(path, "rb") as stream:
        assert reading.count_lines(stream) == 5
    result = runner.invoke(cli, ["import", "prm800k", "--skip-invalid", str(path)])
    assert result.exit_code == 0, result.output
    assert f"{path}:2: the line is longer than {cap} bytes" in result.stderr
    assert "4 labels added" in result.stdout
    assert count_rows(engine)["labels"] == 4
