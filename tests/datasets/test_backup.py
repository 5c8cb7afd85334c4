"""Backup and restore as README.md describes them: an export imported into an empty
database exports the same bytes, and pg_dump / pg_restore (or SQLite's .backup) keep it all."""

import shutil
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli import cli
from app.core.config import get_settings
from app.models import Role, Solution, User
from tests import factories
from tests.conftest import DatabaseFactory

runner = CliRunner()


def use_database(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the command line at ``url``, as STEPLABEL_DATABASE_URL does."""
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", url)
    get_settings.cache_clear()


def steplabel(*args: str) -> None:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 0, result.output


def fill(engine: Engine, tmp_path: Path) -> None:
    """Imported PRM800K lines, the demo's gold labels and labels made in the app."""
    source = tmp_path / "edge-cases.jsonl"
    source.write_text("".join(factories.line(r) for r in factories.edge_case_records()))
    steplabel("import", "prm800k", str(source))
    steplabel("seed-demo", "--credentials", str(tmp_path / "credentials.txt"))
    with Session(engine) as session:
        labeler = session.scalars(select(User).where(User.role == Role.LABELER.value)).first()
        solutions = session.scalars(select(Solution).order_by(Solution.id).limit(2)).all()
        assert labeler is not None and len(solutions) == 2
        first, second = solutions
        factories.make_rated_label(session, labeler, first, [0] * (len(first.steps) - 1) + [-1])
        factories.make_rated_label(session, labeler, second, [1, None][: len(second.steps)])
        session.commit()


def test_an_export_imported_into_an_empty_database_exports_the_same_bytes(
    engine: Engine,
    database_factory: DatabaseFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fill(engine, tmp_path)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    steplabel("export", "--output", str(first))

    use_database(database_factory.new_url(), monkeypatch)
    steplabel("import", "prm800k", str(first))
    steplabel("export", "--output", str(second))
    assert second.read_bytes() == first.read_bytes()
    assert len(first.read_text().splitlines()) > len(factories.edge_case_records())


def test_a_database_dump_restores_everything(
    engine: Engine,
    database_url: str,
    database_factory: DatabaseFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fill(engine, tmp_path)
    before = tmp_path / "before.jsonl"
    steplabel("export", "--output", str(before))
    restored_url = restore(database_url, database_factory, tmp_path)
    use_database(restored_url, monkeypatch)
    after = tmp_path / "after.jsonl"
    steplabel("export", "--output", str(after))
    assert after.read_bytes() == before.read_bytes()
    restored = create_engine(restored_url)
    with restored.connect() as connection:
        users = connection.execute(text("SELECT count(*) FROM users")).scalar()
    restored.dispose()
    with Session(engine) as session:
        assert users == len(session.scalars(select(User)).all())


def restore(url: str, database_factory: DatabaseFactory, tmp_path: Path) -> str:
    """The README's commands: sqlite3 .backup, or pg_dump -Fc then pg_restore into an empty
    database; the restored database's URL."""
    tool = "sqlite3" if database_factory.backend == "sqlite" else "pg_dump"
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    if database_factory.backend == "sqlite":
        copy = tmp_path / "restored.db"
        database = make_url(url).database
        subprocess.run(["sqlite3", database, f".backup '{copy}'"], check=True)
        return f"sqlite:///{copy}"
    dump = tmp_path / "steplabel.dump"
    subprocess.run(["pg_dump", "-Fc", "-f", str(dump), libpq(url)], check=True)
    empty_url = database_factory.new_empty_url()
    subprocess.run(["pg_restore", "--no-owner", "-d", libpq(empty_url), str(dump)], check=True)
    return empty_url


def libpq(url: str) -> str:
    """The URL as pg_dump takes it (no SQLAlchemy driver name)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def test_a_backup_or_restore_with_no_folder_for_its_file_is_one_line(
    database_factory: DatabaseFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_database(database_factory.new_url(), monkeypatch)
    nowhere = tmp_path / "no-such-folder" / "copy.db"
    backup = runner.invoke(cli, ["backup", str(nowhere)])
    assert backup.exit_code == 1 and "Traceback" not in backup.output
    assert (
        backup.stderr.strip() == f"there is no folder {nowhere.parent} for copy.db: create it first"
    )
    assert not nowhere.parent.exists()
    if database_factory.backend != "sqlite":
        return  # restore puts back SQLite backups; Postgres has pg_restore
    copy = tmp_path / "copy.db"
    steplabel("backup", str(copy))
    database = tmp_path / "elsewhere" / "steplabel.db"
    use_database(f"sqlite:///{database}", monkeypatch)
    restore = runner.invoke(cli, ["restore", str(copy)])
    assert restore.exit_code == 1 and "Traceback" not in restore.output
    expected = f"there is no folder {database.parent} for steplabel.db: create it first"
    assert restore.stderr.strip() == expected
    assert not database.parent.exists()
