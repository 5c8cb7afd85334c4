"""Backups while the app serves, and putting a SQLite backup back.

SQLite: Python's own ``sqlite3`` online backup API copies the database in one step, a
consistent snapshot (a read transaction: what was committed when it began, every label
whole), while the app and the worker go on writing; nothing else to install. Postgres:
``pg_dump -Fc`` when it is on PATH (a consistent snapshot too), else the caller is told
to use README's pg_dump route.

Restoring a SQLite backup replaces the database file, so it is refused while another
process has the database open. How that is told: every connection to a SQLite database in
WAL mode (steplabel's mode, app/core/db.py) holds a shared POSIX lock on one byte of the
database's ``-shm`` file for as long as it is open (SQLite's "dead man switch", byte 128:
the first connection to open takes it exclusively to know it is alone). The app's and the
worker's pooled connections stay open while they run, so while either runs, that byte
cannot be locked exclusively. ``open_elsewhere`` tries exactly that, without waiting, and
lets go at once. It sees other processes only (POSIX locks do not conflict within one
process), which is what a command line needs.
"""

import fcntl
import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.engine import make_url

SHM_DEAD_MAN_SWITCH = 128
"""The byte of the ``-shm`` file every open connection holds a shared lock on (SQLite's
unix VFS: UNIX_SHM_BASE 120 plus its 8 WAL locks)."""


class BackupError(RuntimeError):
    """A backup or restore that cannot be made; the message says what to do."""


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL; None for any other database (or in-memory)."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or not parsed.database:
        return None
    if parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def _refuse_existing(target: Path) -> None:
    if target.exists():
        raise BackupError(f"{target} exists already: choose a new path, or remove it first")
    _require_folder(target)


def _require_folder(path: Path) -> None:
    if not path.parent.is_dir():
        raise BackupError(f"there is no folder {path.parent} for {path.name}: create it first")


def backup_sqlite(database: Path, target: Path) -> int:
    """Copy ``database`` to ``target`` through SQLite's online backup; returns its size.

    The copy is written beside ``target`` and renamed into place once whole, so an
    interrupted backup never leaves a file that looks like one."""
    _refuse_existing(target)
    if not database.exists():
        raise BackupError(f"there is no database at {database}")
    partial = target.with_name(target.name + ".partial")
    # Read-write, as the app opens it: a read-only connection to a WAL database fails
    # where its -shm file is not there yet. The backup only reads.
    source = sqlite3.connect(database, timeout=30)
    try:
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)  # all pages in one step: one consistent read transaction
            # A backup file of its own: rollback journal, no WAL beside it to lose.
            copy.execute("PRAGMA journal_mode=DELETE")
            checked = copy.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            copy.close()
    finally:
        source.close()
    if checked != "ok":
        partial.unlink(missing_ok=True)
        raise BackupError(f"the copy failed SQLite's check: {checked}")
    partial.replace(target)
    return target.stat().st_size


def backup_postgres(url: str, target: Path) -> None:
    """``pg_dump -Fc`` of the database at ``url`` into ``target``."""
    _refuse_existing(target)
    pg_dump = shutil.which("pg_dump")
    if pg_dump is None:
        raise BackupError(
            "pg_dump is not on PATH: install the PostgreSQL client (the same major version "
            "as the server) or follow README's Postgres route (Backup and restore)"
        )
    parsed = make_url(url)
    env = dict(os.environ)
    if parsed.password is not None:  # not on the command line, where `ps` shows it
        env["PGPASSWORD"] = parsed.password
    libpq = parsed.set(drivername="postgresql", password=None)
    partial = target.with_name(target.name + ".partial")
    command = [pg_dump, "-Fc", "-f", str(partial), libpq.render_as_string(hide_password=False)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise BackupError(f"pg_dump failed: {done.stderr.strip()}")
    partial.replace(target)


def open_elsewhere(database: Path) -> bool:
    """Whether another process has the SQLite database open (see the module's docstring)."""
    shm = database.with_name(database.name + "-shm")
    try:
        descriptor = os.open(shm, os.O_RDWR)
    except FileNotFoundError:
        return False  # nobody opened it in WAL mode since the last one closed it
    try:
        try:
            fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, SHM_DEAD_MAN_SWITCH)
        except OSError:
            return True
        fcntl.lockf(descriptor, fcntl.LOCK_UN, 1, SHM_DEAD_MAN_SWITCH)
        return False
    finally:
        os.close(descriptor)


@dataclass(frozen=True)
class Restored:
    revision: str | None
    """The schema revision of the backup (``steplabel migrate`` brings it to the code's)."""
    replaced: Path | None
    """Where the database that was there is kept, if there was one."""


def restore_sqlite(backup: Path, database: Path) -> Restored:
    """Put the SQLite ``backup`` in place of ``database``; the database there before is
    kept beside it (``NAME.replaced-<UTC time>``). Refused while another process has the
    database open, and for a file that is not a steplabel database."""
    revision = _check_backup(backup)
    _require_folder(database)
    if open_elsewhere(database):
        raise BackupError(
            f"{database} is open in another process (the app or the worker): stop them, "
            "then restore"
        )
    partial = database.with_name(database.name + ".restoring")
    partial.unlink(missing_ok=True)
    source = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
    try:
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)
        finally:
            copy.close()
    finally:
        source.close()
    replaced = None
    if database.exists():
        _fold_in_wal(database)
        replaced = database.with_name(
            f"{database.name}.replaced-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
        )
        database.replace(replaced)
    for leftover in ("-wal", "-shm"):  # the old database's, never to be applied to the new
        database.with_name(database.name + leftover).unlink(missing_ok=True)
    partial.replace(database)
    return Restored(revision, replaced)


def _check_backup(backup: Path) -> str | None:
    """The backup's schema revision; BackupError unless it is a sound steplabel database."""
    if not backup.is_file():
        raise BackupError(f"there is no backup at {backup}")
    try:
        copy = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
        try:
            checked = copy.execute("PRAGMA quick_check").fetchone()[0]
            row = copy.execute("SELECT version_num FROM alembic_version").fetchone()
        finally:
            copy.close()
    except sqlite3.DatabaseError as error:
        raise BackupError(f"{backup} is not a steplabel SQLite database: {error}") from None
    if checked != "ok":
        raise BackupError(f"{backup} failed SQLite's check: {checked}")
    return None if row is None else str(row[0])


def _fold_in_wal(database: Path) -> None:
    """Checkpoint what the database's WAL still holds into its file, so the copy kept of
    it is whole (the last process to close it normally does this; a crashed one did not)."""
    connection = sqlite3.connect(database)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
