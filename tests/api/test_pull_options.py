"""One definition of a pull's options (app/pull_options.py): the API's route, the Export
page's form, the client and ``steplabel remote pull`` all take exactly its fields."""

import re
from pathlib import Path

import pytest
import typer
from pydantic import TypeAdapter, ValidationError
from typer.testing import CliRunner

from app.inputs import GenerationNumber
from app.main import create_app
from app.pull_options import Generation, PullOptions
from app.remote_cli import remote_cli

ROOT = Path(__file__).resolve().parents[2]
FIELDS = set(PullOptions.model_fields)


def test_the_api_takes_the_options_as_query_parameters() -> None:
    operation = create_app().openapi()["paths"]["/api/v1/labels"]["get"]
    assert {p["name"] for p in operation["parameters"] if p["in"] == "query"} == FIELDS


def test_the_export_page_downloads_with_the_options() -> None:
    download = create_app().openapi()["paths"]["/admin/export/download"]["get"]
    assert {p["name"] for p in download["parameters"] if p["in"] == "query"} == FIELDS
    form = (ROOT / "templates" / "admin" / "export.html").read_text()
    assert set(re.findall(r'name="(\w+)"', form)) == FIELDS


def test_remote_pull_has_an_option_for_each() -> None:
    command = typer.main.get_command(remote_cli).commands["pull"]  # type: ignore[attr-defined]
    flags = {name for param in command.params for name in param.opts}
    assert {"--" + name.replace("_", "-") for name in FIELDS} <= flags


def test_generations_have_the_bounds_the_server_checks_everywhere() -> None:
    for value in (-2, -1, 0, 2**31 - 1, 2**31):
        results = []
        for kind in (Generation, GenerationNumber):
            try:
                TypeAdapter(kind).validate_python(value)
                results.append(True)
            except ValidationError:
                results.append(False)
        assert results[0] == results[1], value


def test_a_blank_since_is_no_cursor_and_the_query_leaves_it_out() -> None:
    assert PullOptions(since="  ").since is None
    assert "since" not in PullOptions().query()
    assert PullOptions(since="id-5", generation=[1, 2]).query()["generation"] == [1, 2]
    with pytest.raises(ValidationError):
        PullOptions(format="csv")  # type: ignore[arg-type]


def test_remote_pull_refuses_bad_options_before_it_connects() -> None:
    arguments = ["pull", "-", "--url", "http://127.0.0.1:1", "--token", "x"]
    result = CliRunner().invoke(remote_cli, [*arguments, "--format", "csv", "--generation", "-5"])
    assert result.exit_code == 2
    assert "--format: Input should be 'prm800k' or 'trl'" in result.output
    assert "--generation: Input should be greater than or equal to -1" in result.output


def test_a_failed_pull_leaves_its_output_file_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "labels.jsonl"
    out.write_text("the last pull\n")
    arguments = ["pull", str(out), "--url", "http://127.0.0.1:1", "--token", "x"]
    result = CliRunner().invoke(remote_cli, arguments)
    assert result.exit_code == 1 and "cannot reach the server" in result.stderr
    assert out.read_text() == "the last pull\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["labels.jsonl"]


@pytest.mark.parametrize("field", ["since", "labeler"])
def test_text_no_database_can_store_is_refused(field: str) -> None:
    value = "lab\x00" if field == "since" else ["lab\x00"]
    with pytest.raises(ValidationError, match="NUL"):
        PullOptions.model_validate({field: value})


def test_remote_push_of_an_empty_file_or_a_folder_says_so_before_it_connects(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    arguments = ["--url", "http://127.0.0.1:1", "--token", "x"]
    nothing = CliRunner().invoke(remote_cli, ["push", str(empty), *arguments])
    assert nothing.exit_code == 0 and nothing.stdout == f"{empty} has no lines: nothing pushed\n"
    folder = CliRunner().invoke(remote_cli, ["push", str(tmp_path), *arguments])
    assert folder.exit_code == 2 and folder.stderr == f"{tmp_path}: a folder, not a file\n"
