"""Uploads: imported in the background as jobs, through the CLI's importers, with its
line-numbered errors and nothing written on error."""

import errno
import gc
import io
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.admin import import_jobs
from app.admin.import_jobs import UNFINISHED
from app.admin.imports import UploadOptions, UploadResult, import_upload, upload_name
from app.cli import cli
from app.core import db
from app.main import create_app
from app.models import (
    ImportJob,
    JobStatus,
    Label,
    Problem,
    QueueState,
    Role,
    Solution,
    StepCompletion,
)
from app.progress import Progress
from tests import factories
from tests.admin.conftest import HTMX, Admin
from tests.outage import block_database, unblock_database
from tests.web import add_user, log_in

runner = CliRunner()
BAD_LINE = factories.line(factories.record(finish_reason="done"))
JOB_ROW = re.compile(r'<tr id="job-(\d+)" data-status="(\w+)">')
WAIT_SECONDS = 120


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


def job_statuses(page: str) -> dict[int, str]:
    return {int(job_id): status for job_id, status in JOB_ROW.findall(page)}


def finished(admin: Admin, engine: Engine, response: httpx.Response) -> tuple[ImportJob, str]:
    """Poll the Imports page as the browser does until the upload's job ends."""
    assert response.status_code == 200, response.text
    job_id = max(job_statuses(response.text))  # the newest job is the upload's
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        page = admin.client.get("/admin/imports", headers=HTMX).text
        if job_statuses(page)[job_id] not in import_jobs.UNFINISHED:
            with Session(engine) as session:
                return session.get_one(ImportJob, job_id), page
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} did not finish in {WAIT_SECONDS} s")


def imported(admin: Admin, engine: Engine, name: str, content: bytes, **fields: str) -> str:
    """Upload, wait for the job, and return the Imports page that shows how it ended."""
    return finished(admin, engine, upload(admin, name, content, **fields))[1]


def test_an_upload_answers_at_once_and_imports_in_the_background(
    admin: Admin, engine: Engine, app_client: TestClient
) -> None:
    answer = upload(admin, "good.jsonl", "".join(good_lines(4)).encode())
    assert answer.status_code == 200 and answer.headers["HX-Trigger"] == "dashboard-refresh"
    # The answer was made before the import began: the job is queued, and the page polls.
    assert "Received good.jsonl (4 lines)" in answer.text
    assert list(job_statuses(answer.text).values()) == ["queued"]
    assert 'hx-trigger="every 1s"' in answer.text
    job, page = finished(admin, engine, answer)
    assert job.status == JobStatus.SUCCEEDED and job.lines_done == job.lines_total == 4
    assert job.error is None and job.started_at and job.finished_at
    summary = "4 lines read: 4 labels added, 0 already present, 0 invalid skipped"
    assert job.summary is not None and job.summary.startswith(summary) and summary in page
    assert 'hx-trigger="every 1s"' not in page  # nothing left to watch
    assert counts(engine)["labels"] == 4

    # Any admin sees the job, with who uploaded it.
    other = TestClient(app_client.app)
    add_user(engine, "second", role=Role.ADMIN)
    log_in(other, "second")
    assert summary in other.get("/admin/imports").text and "root" in page

    again = imported(admin, engine, "good.jsonl", "".join(good_lines(4)).encode())
    assert "0 labels added, 4 already present" in again
    assert counts(engine)["labels"] == 4


def test_the_lines_column_counts_the_lines_read_as_the_summary_does(
    admin: Admin, engine: Engine
) -> None:
    """Blank lines are skipped, not read: the Lines column and the notice do not count them
    either, so that "4 / 4" sits beside "4 lines read"."""
    lines = good_lines(4)
    content = "\ufeff\n" + "\n".join([lines[0], "", *lines[1:3], " \t\u3000", lines[3], "\n"])
    answer = upload(admin, "blanks.jsonl", content.encode())
    assert "Received blanks.jsonl (4 lines)" in answer.text
    job, page = finished(admin, engine, answer)
    assert job.summary is not None and job.summary.startswith("4 lines read: 4 labels added")
    assert (job.lines_done, job.lines_total) == (4, 4)
    assert re.search(r"</progress>\s*4 / 4\s", page)


def test_a_bad_line_fails_the_job_with_the_clis_error_and_writes_nothing(
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

    job, page = finished(admin, engine, upload(admin, "labels.jsonl", content.encode()))
    assert job.status == JobStatus.FAILED and job.error == cli_error
    assert job.summary is None and job.lines_done == 3  # it stopped at line 3 of 4
    escaped = cli_error.replace("'", "&#39;").replace('"', "&#34;")
    assert f"<code>{escaped}</code>" in page and "Nothing was imported." in page
    assert set(counts(engine).values()) == {0}


def test_progress_is_written_while_the_job_runs(
    admin: Admin, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite: the import holds the one write lock, which every page waits for")
    monkeypatch.setattr(import_jobs, "PROGRESS_SECONDS", 0.01)
    problems = [{"problem": f"What is {n}+{n}?", "answer": str(2 * n)} for n in range(20_000)]
    content = "".join(factories.line(p) for p in problems).encode()
    answer = upload(admin, "many.jsonl", content, kind="problems")
    (job_id,) = job_statuses(answer.text)
    seen: list[tuple[str, int]] = []
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline and (not seen or seen[-1][0] in import_jobs.UNFINISHED):
        with Session(engine) as session:
            row = session.get_one(ImportJob, job_id)
            seen.append((row.status, row.lines_done))
        time.sleep(0.01)
    assert seen[-1] == ("succeeded", 20_000)
    partway = [done for status, done in seen if status == "running" and 0 < done < 20_000]
    assert partway and partway == sorted(partway)
    page = admin.client.get("/admin/imports").text
    assert "20,000 / 20,000" in page and "lines/s" in page
    assert counts(engine)["problems"] == 20_000


def test_skip_invalid_lists_the_bad_lines(admin: Admin, engine: Engine) -> None:
    content = "".join([good_lines(1)[0], "not json\n", BAD_LINE, *good_lines(3)[1:]])
    page = imported(admin, engine, "mixed.jsonl", content.encode(), skip_invalid="true")
    assert "2 invalid skipped" in page
    assert "<code>mixed.jsonl:2: invalid JSON" in page
    assert "<code>mixed.jsonl:3: label.finish_reason" in page
    assert counts(engine)["labels"] == 3


def test_solutions_go_to_the_generation_asked_for_or_to_the_pool(
    admin: Admin, engine: Engine
) -> None:
    problems = [{"problem": f"What is {n}+{n}?", "answer": str(2 * n)} for n in (1, 2)]
    problem_lines = "".join(factories.line(p) for p in problems).encode()
    imported(admin, engine, "p.jsonl", problem_lines, kind="problems")
    solutions = [{"problem": p["problem"], "steps": ["Add.", p["answer"]]} for p in problems]
    queued = imported(
        admin,
        engine,
        "s.jsonl",
        factories.line(solutions[0]).encode(),
        kind="solutions",
        generation="5",
    )
    assert "1 solutions added" in queued
    pool = factories.line(solutions[1]).encode()
    imported(admin, engine, "pool.jsonl", pool, kind="solutions", no_queue="true")
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
        # Issue 16: an INTEGER column on Postgres stops at 2**31 - 1.
        (
            {"kind": "solutions", "generation": "100000000000"},
            "generation: give a number of at most 2,147,483,647",
        ),
        ({"kind": "solutions", "generation": "-2"}, "generation: give a number of at least -1"),
    ],
)
def test_bad_options_are_refused(
    admin: Admin, engine: Engine, fields: dict[str, str], message: str
) -> None:
    page = upload(admin, "good.jsonl", "".join(good_lines(1)).encode(), **fields)
    assert page.status_code == 422
    assert message in page.text and "Nothing was imported." in page.text
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(ImportJob)) == 0


def test_an_upload_without_a_file(admin: Admin) -> None:
    refused = admin.post("/admin/imports", {"kind": "prm800k"})
    assert refused.status_code == 422 and "choose a JSONL file" in refused.text


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of the test's own, where what an upload leaves behind shows."""
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_a_file_name_longer_than_a_job_keeps_is_refused(
    admin: Admin, engine: Engine, temp_dir: Path
) -> None:
    content = "".join(good_lines(1)).encode()
    refused = upload(admin, "x" * 252 + ".jsonl", content)
    assert refused.status_code == 422
    message = "the file&#39;s name has 258 characters, more than the 255 a job keeps: rename it"
    assert message in refused.text and "Nothing was imported." in refused.text
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(ImportJob)) == 0
    assert list(temp_dir.iterdir()) == []
    job, _ = finished(admin, engine, upload(admin, "x" * 249 + ".jsonl", content))
    assert job.status == JobStatus.SUCCEEDED and len(job.filename) == 255
    assert list(temp_dir.iterdir()) == []


def test_a_spool_that_fills_the_disk_leaves_no_file_behind(
    temp_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full_halfway(source: BinaryIO, target: BinaryIO, _length: int) -> None:
        target.write(source.read(100))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", disk_full_halfway)
    with pytest.raises(OSError, match="No space left"):
        import_jobs.spool(io.BytesIO(b"{}\n" * 1000))
    assert list(temp_dir.iterdir()) == []


def test_an_upload_whose_job_cannot_be_added_closes_its_spool(
    session: Session, temp_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spooled: list[BinaryIO] = []
    original = import_jobs.spool

    def spool(source: BinaryIO) -> tuple[BinaryIO, int]:
        upload, lines = original(source)
        spooled.append(upload)
        return upload, lines

    def no_job(*_args: object) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(import_jobs, "spool", spool)
    monkeypatch.setattr(import_jobs, "add_job", no_job)
    options = UploadOptions("problems")
    with pytest.raises(RuntimeError, match="went away"):
        import_jobs.queue_upload(session, io.BytesIO(b"{}\n"), "p.jsonl", options, 1)
    assert [upload.closed for upload in spooled] == [True]
    assert list(temp_dir.iterdir()) == []


def test_jobs_left_unfinished_are_marked_interrupted_when_the_app_starts(engine: Engine) -> None:
    with Session(engine) as session:
        left = [ImportJob(kind="prm800k", filename="big.jsonl", status=s) for s in UNFINISHED]
        done = ImportJob(kind="prm800k", filename="old.jsonl", status="succeeded")
        session.add_all([*left, done])
        session.commit()
    with TestClient(create_app()):
        pass
    with Session(engine) as session:
        jobs = session.scalars(select(ImportJob).order_by(ImportJob.id)).all()
        assert [job.status for job in jobs] == ["failed", "failed", "succeeded"]
        assert jobs[0].error == import_jobs.INTERRUPTED and jobs[0].finished_at is not None


def test_the_service_reads_a_stream_in_a_savepoint(session: Session) -> None:
    stream = io.BytesIO("".join([good_lines(1)[0], "{}\n"]).encode())
    result = import_upload(session, "C:\\Users\\me\\labels.jsonl", stream, UploadOptions("prm800k"))
    assert result.error is not None and result.error.startswith("labels.jsonl:2: labeler: Field")
    assert not result.imported
    assert session.scalar(select(func.count()).select_from(Label)) == 0


def test_an_upload_leaves_the_garbage_collector_on(session: Session) -> None:
    """The collector is the web process's: paused by an upload's thread, it would be off for
    every request beside it until the import ended."""
    collecting = []
    progress = Progress(lambda _done: collecting.append(gc.isenabled()), interval=0)
    stream = io.BytesIO("".join(good_lines(3)).encode())
    result = import_upload(session, "labels.jsonl", stream, UploadOptions("prm800k"), progress)
    assert result.error is None and result.imported
    assert collecting == [True] * 3


def test_an_upload_is_spooled_and_its_lines_counted(temp_dir: Path) -> None:
    upload, lines = import_jobs.spool(io.BytesIO(b"{}\n\n{}"))
    with upload:
        assert upload.read() == b"{}\n\n{}" and lines == 2  # the blank line is not read
        # The copy has no name: nothing is left of it in the folder, whatever happens.
        assert list(temp_dir.iterdir()) == []


def test_upload_name_keeps_only_the_file_name() -> None:
    assert upload_name("../../etc/passwd") == "passwd"
    assert upload_name("C:\\data\\x.jsonl") == "x.jsonl"
    assert upload_name(None) == upload_name("") == "upload.jsonl"


def _queued_job(engine: Engine, content: bytes) -> tuple[int, BinaryIO]:
    upload, lines = import_jobs.spool(io.BytesIO(content))
    with Session(engine) as session:
        admin = factories.make_user(session, "root", role=Role.ADMIN)
        job = import_jobs.add_job(
            session, "labels.jsonl", UploadOptions("prm800k"), lines, admin.id
        )
        session.commit()
        return job.id, upload


def test_a_database_restart_during_an_import_ends_its_job_failed_once_it_is_back(
    engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import's connection is ended and new ones refused for a while (a restart): the
    job's failure is recorded once the database is back, not left "running" for good (the
    client polls a job until it ends). Nothing of the file is written."""
    if not database_url.startswith("postgresql"):
        pytest.skip("a database server to make unreachable")
    monkeypatch.setattr(db, "AWAY_RETRY_MAX_S", 0.5)
    job_id, upload = _queued_job(engine, "".join(good_lines(3)).encode())
    real_import = import_jobs.import_upload

    def import_into_a_restart(*args: Any) -> UploadResult:
        block_database(database_url)
        threading.Timer(1.5, unblock_database, (database_url,)).start()
        return real_import(*args)

    monkeypatch.setattr(import_jobs, "import_upload", import_into_a_restart)
    with upload:
        import_jobs.run_job(engine, job_id, upload)

    with Session(engine) as session:
        job = session.get_one(ImportJob, job_id)
        assert job.status == "failed" and job.finished_at is not None
        assert job.error is not None
        assert job.error.startswith("the import stopped: the database failed: ")
        assert "SELECT" not in job.error and "INSERT" not in job.error  # one line, no SQL
    assert counts(engine) == {"labels": 0, "step_completions": 0, "problems": 0, "solutions": 0}


def test_a_job_that_starts_while_the_database_is_away_runs_once_it_is_back(
    engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("a database server to make unreachable")
    monkeypatch.setattr(db, "AWAY_RETRY_MAX_S", 0.5)
    job_id, upload = _queued_job(engine, "".join(good_lines(3)).encode())
    block_database(database_url)
    threading.Timer(1.5, unblock_database, (database_url,)).start()
    with upload:
        import_jobs.run_job(engine, job_id, upload)
    with Session(engine) as session:
        job = session.get_one(ImportJob, job_id)
        assert (job.status, job.lines_done, job.error) == ("succeeded", 3, None)
    assert counts(engine)["labels"] == 3
