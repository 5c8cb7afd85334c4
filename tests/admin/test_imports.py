"""Uploads: the CLI's importers, its line-numbered errors, and nothing written on error."""

import io
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.admin.imports import UploadOptions, import_upload, upload_name
from app.cli import cli
from app.models import Label, Problem, QueueState, Solution, StepCompletion
from tests import factories
from tests.admin.conftest import Admin

runner = CliRunner()
BAD_LINE = factories.line(factories.record(finish_reason="done"))


def good_lines(count: int) -> list[str]:
    return [factories.line(r) for r in factories.edge_case_records()[:count]]


def counts(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return {
            model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
            for model in (Label, StepCompletion, Problem, Solution)
        }


def upload(admin: Admin, name: str, content: bytes, **fields: str) -> httpx.Response:
    """Post a file as the upload form does with htmx."""
    return admin.client.post(
        "/admin/imports",
        data={"kind": "prm800k", **fields},
        files={"file": (name, content, "application/jsonl")},
        headers={"HX-Request": "true", "X-CSRF-Token": admin.token},
    )


def test_upload_gives_the_clis_error_and_writes_nothing(
    admin: Admin, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = good_lines(3)
    content = "".join([*lines[:2], BAD_LINE, *lines[2:]])
    monkeypatch.chdir(tmp_path)
    Path("labels.jsonl").write_text(content)
    cli_result = runner.invoke(cli, ["import", "prm800k", "labels.jsonl"])
    assert cli_result.exit_code == 1
    cli_error = cli_result.stderr.splitlines()[0]
    assert cli_error.startswith("labels.jsonl:3: label.finish_reason: Input should be")

    answer = upload(admin, "labels.jsonl", content.encode())
    assert answer.status_code == 422
    assert "HX-Trigger" not in answer.headers
    escaped = cli_error.replace("'", "&#39;").replace('"', "&#34;")
    assert f"<code>{escaped}</code>" in answer.text
    assert "Nothing was imported." in answer.text
    assert set(counts(engine).values()) == {0}


def test_upload_imports_like_the_cli(admin: Admin, engine: Engine) -> None:
    page = upload(admin, "good.jsonl", "".join(good_lines(4)).encode())
    assert page.status_code == 200 and page.headers["HX-Trigger"] == "dashboard-refresh"
    assert "4 lines read: 4 labels added, 0 already present, 0 invalid skipped" in page.text
    again = upload(admin, "good.jsonl", "".join(good_lines(4)).encode())
    assert "0 labels added, 4 already present" in again.text
    assert counts(engine)["labels"] == 4


def test_skip_invalid_lists_the_bad_lines(admin: Admin, engine: Engine) -> None:
    content = "".join([good_lines(1)[0], "not json\n", BAD_LINE, *good_lines(3)[1:]])
    page = upload(admin, "mixed.jsonl", content.encode(), skip_invalid="true").text
    assert "2 invalid skipped" in page
    assert "<code>mixed.jsonl:2: invalid JSON" in page
    assert "<code>mixed.jsonl:3: label.finish_reason" in page
    assert counts(engine)["labels"] == 3


def test_solutions_go_to_the_generation_asked_for_or_to_the_pool(
    admin: Admin, engine: Engine
) -> None:
    problems = [{"problem": f"What is {n}+{n}?", "answer": str(2 * n)} for n in (1, 2)]
    upload(admin, "p.jsonl", "".join(factories.line(p) for p in problems).encode(), kind="problems")
    solutions = [{"problem": p["problem"], "steps": ["Add.", p["answer"]]} for p in problems]
    queued = upload(
        admin, "s.jsonl", factories.line(solutions[0]).encode(), kind="solutions", generation="5"
    )
    assert "1 solutions added" in queued.text
    pool = factories.line(solutions[1]).encode()
    upload(admin, "pool.jsonl", pool, kind="solutions", no_queue="true")
    with Session(engine) as session:
        columns = select(Solution.generation, Solution.queue_state).order_by(Solution.id)
        rows = session.execute(columns)
        assert [tuple(row) for row in rows] == [
            (5, QueueState.OPEN.value),
            (None, QueueState.NOT_QUEUED.value),
        ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "videos"}, "choose what the file holds"),
        ({"kind": "solutions", "generation": "first"}, "generation: give a whole number"),
    ],
)
def test_bad_options_are_refused(
    admin: Admin, engine: Engine, fields: dict[str, str], message: str
) -> None:
    page = upload(admin, "good.jsonl", "".join(good_lines(1)).encode(), **fields)
    assert page.status_code == 422
    assert message in page.text and "Nothing was imported." in page.text
    assert counts(engine)["labels"] == 0


def test_an_upload_without_a_file(admin: Admin) -> None:
    refused = admin.post("/admin/imports", {"kind": "prm800k"})
    assert refused.status_code == 422 and "choose a JSONL file" in refused.text


def test_the_service_reads_a_stream_in_a_savepoint(session: Session) -> None:
    stream = io.BytesIO("".join([good_lines(1)[0], "{}\n"]).encode())
    result = import_upload(session, "C:\\Users\\me\\labels.jsonl", stream, UploadOptions("prm800k"))
    assert result.error is not None and result.error.startswith("labels.jsonl:2: labeler: Field")
    assert not result.imported
    assert session.scalar(select(func.count()).select_from(Label)) == 0


def test_upload_name_keeps_only_the_file_name() -> None:
    assert upload_name("../../etc/passwd") == "passwd"
    assert upload_name("C:\\data\\x.jsonl") == "x.jsonl"
    assert upload_name(None) == upload_name("") == "upload.jsonl"
