"""`steplabel backup` while labelers submit as fast as they can (SQLite and Postgres): the
copy holds every label acknowledged before it began, and any later one whole, each
exporting the same PRM800K line as in the database at the end; never a torn label. And
`steplabel restore` on SQLite: refused while the app has the database open, then done."""

import io
import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli import cli
from app.core.config import get_settings
from app.core.db import make_engine
from app.datasets.export import ExportFilter, write_export
from app.models import Label, User
from bench.labeling_setup import create_labelers, create_queue
from tests.browser.live import running_server
from tests.conftest import DatabaseFactory
from tests.datasets.test_backup import libpq
from tests.factories import PASSWORD
from tests.labelers import Labelers

LABELERS = 4
runner = CliRunner()


def use_database(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", url)
    get_settings.cache_clear()


@pytest.fixture
def served(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[tuple[str, str, Engine]]:
    """A server on a fresh database with labelers and a queue: its URL, the database's URL
    and an engine on it."""
    url = database_factory.new_url()
    engine = make_engine(url)
    create_labelers(engine, [f"copy-{n}" for n in range(LABELERS)], PASSWORD)
    create_queue(engine, 1_000, random.Random(43))
    try:
        with running_server(url, tmp_path) as server:
            yield server, url, engine
    finally:
        engine.dispose()


def lines_by_label(engine: Engine) -> dict[int, str]:
    """Every label's PRM800K line, by label id."""
    with Session(engine) as session:
        ids = session.scalars(select(Label.id).order_by(Label.id)).all()
        out = io.StringIO()
        write_export(session, out, ExportFilter(), "prm800k")
    return dict(zip(ids, out.getvalue().splitlines(), strict=True))


def restored_copy(copy: Path, database_factory: DatabaseFactory) -> str:
    if database_factory.backend == "sqlite":
        return f"sqlite:///{copy}"
    empty = database_factory.new_empty_url()
    subprocess.run(["pg_restore", "--no-owner", "-d", libpq(empty), str(copy)], check=True)
    return empty


def test_a_backup_taken_under_load_holds_whole_labels_only(
    served: tuple[str, str, Engine],
    database_factory: DatabaseFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if database_factory.backend == "postgres" and shutil.which("pg_restore") is None:
        pytest.skip("pg_dump and pg_restore are not installed")
    server, url, engine = served
    labelers = Labelers(server, [f"copy-{n}" for n in range(LABELERS)])
    labelers.start()
    copy = tmp_path / "copy.backup"
    try:
        time.sleep(1.0)
        began = time.monotonic()
        use_database(url, monkeypatch)
        result = runner.invoke(cli, ["backup", str(copy)])
        done = time.monotonic()
        time.sleep(0.5)
    finally:
        labelers.stop()
    assert result.exit_code == 0, result.output
    assert not labelers.failures, labelers.failures
    submits = [e for e in labelers.exchanges if e.kind == "submit" and e.status == 200]
    before = {e.label_id for e in submits if e.answered_at < began}
    during = [e for e in submits if e.sent_at < done and e.answered_at > began]
    assert before and during, "labels were acknowledged before the copy and while it ran"

    copied_url = restored_copy(copy, database_factory)
    copied_engine = make_engine(copied_url)
    try:
        copied = lines_by_label(copied_engine)
    finally:
        copied_engine.dispose()
    final = lines_by_label(engine)
    assert before <= copied.keys(), "every label acknowledged before the copy is in it"
    assert copied.keys() <= final.keys()
    torn = [label for label, line in copied.items() if final[label] != line]
    assert torn == [], "each copied label exports as it does in the database: whole"
    assert len(final) > len(copied), "labels went on after the copy"


def test_backup_then_restore_on_sqlite_refused_while_the_app_runs(
    database_factory: DatabaseFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if database_factory.backend != "sqlite":
        pytest.skip("restore puts back SQLite backups; Postgres has pg_restore")
    url = database_factory.new_url()
    database = Path(url.removeprefix("sqlite:///"))
    use_database(url, monkeypatch)
    add = ["users", "add", "--password", PASSWORD]
    assert runner.invoke(cli, [*add[:2], "ada", *add[2:]]).exit_code == 0
    backup = tmp_path / "ada.db"
    made = runner.invoke(cli, ["backup", str(backup)])
    assert made.exit_code == 0 and f"backed up to {backup}" in made.output
    again = runner.invoke(cli, ["backup", str(backup)])
    assert again.exit_code == 1 and "exists already" in again.output
    assert runner.invoke(cli, [*add[:2], "bea", *add[2:]]).exit_code == 0

    with running_server(url, tmp_path):
        refused = runner.invoke(cli, ["restore", str(backup)])
        assert refused.exit_code == 1, refused.output
        assert "is open in another process (the app or the worker)" in refused.output
    restored = runner.invoke(cli, ["restore", str(backup)])
    assert restored.exit_code == 0, restored.output
    assert "pipelines that pull labels: pull once without --since" in restored.output
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            names = session.scalars(select(User.name).order_by(User.name)).all()
    finally:
        engine.dispose()
    assert names == ["ada"], "the database is the backup's"
    [kept] = database.parent.glob(f"{database.name}.replaced-*")
    kept_engine = make_engine(f"sqlite:///{kept}")
    try:
        with Session(kept_engine) as session:
            assert sorted(session.scalars(select(User.name))) == ["ada", "bea"]
    finally:
        kept_engine.dispose()
    not_a_backup = tmp_path / "junk.db"
    not_a_backup.write_text("not a database")
    junk = runner.invoke(cli, ["restore", str(not_a_backup)])
    assert junk.exit_code == 1 and "is not a steplabel SQLite database" in junk.output
