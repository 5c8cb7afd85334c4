"""The steplabel command line: migrate, import, export and seed the demo."""

# Why one module over 500 lines: it is the one typer app, nineteen thin commands that
# share its option types and each import their work when they run; its docstring is the
# help text, so this note stays a comment.
#
# Each command imports what it needs when it runs: `steplabel --help` loads typer and none of
# SQLAlchemy, pydantic or numpy (tests/test_cli.py checks), so the few values the options
# need from the tables are spelled out here, and a test checks that they agree.

import enum
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from app.cli_common import (
    DATABASE_FAILED,
    IncludeQcOption,
    IncludeScreeningOption,
    LabelerOption,
    database_failure,
    database_name,
    replaced_when_whole,
)
from app.cli_common import fail as _fail
from app.cli_common import require_current_schema as _require_current_schema
from app.progress import TerminalProgress, terminal_progress
from app.remote_cli import remote_cli, tokens_cli

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.datasets.demo_seed import SeedReport
    from app.datasets.export import ExportFilter
    from app.datasets.importing import ImportSummary
    from app.datasets.reading import ImportLineError

EXPORT_FORMATS = ("prm800k", "trl")
"""What ``write_export`` writes."""
NOTES_FORMAT = "notes"
AUDIT_FORMAT = "audit"
FORMATS = (*EXPORT_FORMATS, NOTES_FORMAT, AUDIT_FORMAT)

cli = typer.Typer(
    help=__doc__, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False
)
import_cli = typer.Typer(help="Import JSONL files; each command is one transaction.")
cli.add_typer(import_cli, name="import")
users_cli = typer.Typer(help="Labelers and admins.", no_args_is_help=True)
cli.add_typer(users_cli, name="users")
qc_cli = typer.Typer(help="Quality-control questions and their gold labels.", no_args_is_help=True)
cli.add_typer(qc_cli, name="qc")
cli.add_typer(tokens_cli, name="tokens")
cli.add_typer(remote_cli, name="remote")

Files = Annotated[list[Path], typer.Argument(help="JSONL files ('-' for standard input).")]
SkipInvalid = Annotated[
    bool, typer.Option("--skip-invalid", help="Report bad lines and import the rest.")
]
GENERATION_BOUNDS = (-(2**31), 2**31 - 1)
"""What ``solutions.generation`` (INTEGER) holds."""


class RoleName(enum.StrEnum):
    """The values of ``app.models.Role``."""

    LABELER = "labeler"
    ADMIN = "admin"


@cli.command()
def migrate() -> None:
    """Create or upgrade the database schema."""
    from sqlalchemy.exc import OperationalError

    from app.core import schema
    from app.core.config import get_settings

    try:
        schema.upgrade(get_settings().database_url)
    except OperationalError as error:  # no server there, no such folder for the file, ...
        _fail(f"cannot open the database {database_name()}: {error.orig}")
    typer.echo(f"database at head: {database_name()}")
    # Not a data migration: one transaction over every label could not resume, and the
    # text must be what today's export code builds, which a frozen revision cannot import.
    fill_stored_text()


@cli.command("fill-stored-text")
def fill_stored_text() -> None:
    """Store the PRM800K text of labels and solutions saved before it was stored (as
    `migrate` does), a transaction per 1,000 rows: a stopped run goes on where it stopped."""
    from app.core.db import get_engine
    from app.datasets import stored_text

    _require_current_schema()
    typer.echo(stored_text.fill_stored_text(get_engine()).describe())


ImportFunction = Callable[..., "ImportSummary"]


def _report_skipped(bar: TerminalProgress | None, error: "ImportLineError") -> None:
    """A skipped line on standard error, above the progress bar where one is drawn."""
    if bar is None:
        typer.echo(f"{error} (skipped)", err=True)
    else:
        bar.note(f"{error} (skipped)")


def _run_import(function: ImportFunction, kind: str, files: list[Path], skip_invalid: bool) -> None:
    from sqlalchemy.exc import IntegrityError, OperationalError

    from app import audit
    from app.core.db import is_database_away, transaction
    from app.datasets.bulk import paused_gc
    from app.datasets.reading import ImportLineError, count_file_lines, read_files

    _require_current_schema()
    try:
        with (
            terminal_progress("importing", "lines", lambda: count_file_lines(files)) as bar,
            transaction() as session,
            paused_gc(),
        ):
            summary = function(
                session,
                read_files(files, bar),
                skip_invalid=skip_invalid,
                on_invalid=partial(_report_skipped, bar),
            )
            names = ", ".join(str(file) for file in files)
            after = {"summary": summary.describe(), "skip_invalid": skip_invalid}
            audit.record(session, None, "import.run", f"{kind}: {names}", None, after)
    except ImportLineError as error:
        _fail(f"{error}\nnothing was imported")
    except IntegrityError:
        _fail(
            "another import added the same rows at the same time; nothing was imported.\n"
            "Run this import again: it skips what is already there."
        )
    except OperationalError as error:
        if not is_database_away(error):
            raise
        _fail(
            f"{database_failure(error)}\nnothing was imported: run the import again once "
            "the database answers",
            DATABASE_FAILED,
        )
    typer.echo(summary.describe())


@import_cli.command("prm800k")
def import_prm800k(files: Files, skip_invalid: SkipInvalid = False) -> None:
    """PRM800K label lines: phase 1 and 2, quality-control and screening questions."""
    from app.datasets import importing

    _run_import(importing.import_prm800k, "prm800k", files, skip_invalid)


@import_cli.command("problems")
def import_problems(files: Files, skip_invalid: SkipInvalid = False) -> None:
    """MATH problems: PRM800K's split format or the original Hendrycks format."""
    from app.datasets import importing

    _run_import(importing.import_problems, "problems", files, skip_invalid)


@import_cli.command("solutions")
def import_solutions(
    files: Files,
    skip_invalid: SkipInvalid = False,
    generation: Annotated[
        int,
        typer.Option(
            help="The generation new solutions are queued in (-1: screening).",
            min=GENERATION_BOUNDS[0],
            max=GENERATION_BOUNDS[1],
        ),
    ] = 0,
    queue: Annotated[
        bool, typer.Option("--queue/--no-queue", help="Put new solutions in the labeling queue.")
    ] = True,
) -> None:
    """Model solutions to label: {problem|unique_id, steps|solution, answer?, score?, ...}."""
    from app.datasets import importing

    _run_import(
        partial(importing.import_solutions, generation=generation, queue=queue),
        "solutions",
        files,
        skip_invalid,
    )


@contextmanager
def _output(path: str) -> Iterator[TextIO]:
    """``path`` opened for text, or standard output for '-'. A file is written beside
    ``path`` and takes its place once the export is whole (``replaced_when_whole``)."""
    if path == "-":
        yield sys.stdout
        return
    with (
        replaced_when_whole(Path(path)) as partial,
        open(partial, "w", encoding="utf-8", newline="\n") as stream,
    ):
        yield stream


@cli.command()
def export(
    output: Annotated[str, typer.Option("--output", "-o", help="File to write, '-' for stdout.")],
    export_format: Annotated[
        str, typer.Option("--format", help=f"One of: {', '.join(FORMATS)}.")
    ] = "prm800k",
    generation: Annotated[
        list[int] | None, typer.Option(help="Only these generations (repeatable).")
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            help="Only labels made at or after this time (UTC unless an offset is given)."
        ),
    ] = None,
    labeler: LabelerOption = None,
    include_qc: IncludeQcOption = True,
    include_screening: IncludeScreeningOption = True,
    consensus: Annotated[
        bool,
        typer.Option(
            "--consensus",
            help="One PRM800K line per solution: its labelers' consensus or its adjudication, "
            "with its provenance in the side field steplabel_consensus (README).",
        ),
    ] = False,
) -> None:
    """Write labels as PRM800K JSONL (one line per label, or per solution with --consensus)
    or TRL stepwise rows, the give-up and bad-problem notes of the labels (--format notes),
    or the audit log of the admins' changes (--format audit, one JSON line per entry, oldest
    first)."""
    from sqlalchemy.exc import OperationalError

    from app.core.db import is_database_away, transaction
    from app.datasets.bulk import paused_gc
    from app.datasets.export import ExportError, ExportFilter, count_labels, unknown_labelers

    if export_format not in FORMATS:
        _fail(f"--format must be one of {', '.join(FORMATS)}, not {export_format!r}", 2)
    if consensus and export_format != "prm800k":
        _fail("--consensus writes PRM800K lines: leave --format out (or --format prm800k)", 2)
    label_filter = ExportFilter(
        generations=generation or (),
        since=since,
        labelers=labeler or (),
        include_quality_control=include_qc,
        include_screening=include_screening,
    )
    _require_current_schema()
    with transaction() as session:
        unknown = unknown_labelers(session, label_filter.labelers)
    if unknown:
        names = ", ".join(map(repr, unknown))
        _fail(f"--labeler: no user has the name or UUID {names} (steplabel users list)", 2)
    try:
        with (
            transaction() as session,
            _output(output) as stream,
            # Not over lines written to the same terminal: each would break the other.
            terminal_progress(
                "exporting",
                "labels",
                lambda: count_labels(session, label_filter),
                # A consensus export writes fewer lines than the labels it counts.
                quiet=(output == "-" and sys.stdout.isatty())
                or export_format in (NOTES_FORMAT, AUDIT_FORMAT)
                or consensus,
            ) as bar,
            paused_gc(),
        ):
            written = _write(session, stream, label_filter, export_format, bar, consensus)
    except ExportError as error:
        _fail(f"{error}; the export stopped there")
    except OSError as error:  # no such folder, a folder given as the file, a full disk
        _fail(f"cannot write {output}: {error.strerror or error}")
    except OperationalError as error:
        if not is_database_away(error):
            raise
        kept = "" if output == "-" else f"; {output} is as it was"
        _fail(f"{database_failure(error)}\nthe export stopped{kept}", DATABASE_FAILED)
    where = "standard output" if output == "-" else output
    typer.echo(f"wrote {written} to {where}", err=True)


def _write(
    session: "Session",
    stream: TextIO,
    label_filter: "ExportFilter",
    export_format: str,
    bar: TerminalProgress | None,
    consensus: bool = False,
) -> str:
    """Write the export in ``export_format``; returns what it wrote, in words."""
    from app.admin.notes import write_notes
    from app.audit import AuditFilter, write_audit
    from app.datasets.export import write_consensus_export, write_export

    if consensus:
        return write_consensus_export(session, stream, label_filter).describe()

    # PRM800K has no field for a note: notes go to a file of their own.
    if export_format == NOTES_FORMAT:
        return f"{write_notes(session, stream, label_filter)} notes"
    if export_format == AUDIT_FORMAT:  # the admins' changes; of the filters, --since applies
        return (
            f"{write_audit(session, stream, AuditFilter(since=label_filter.since))} audit entries"
        )
    return write_export(session, stream, label_filter, export_format, bar).describe()


@cli.command()
def backup(
    path: Annotated[Path, typer.Argument(help="The file to write (it must not exist yet).")],
) -> None:
    """Copy the database while the app serves: SQLite through its online backup, Postgres
    with pg_dump -Fc (when pg_dump is on PATH)."""
    from app.backup import BackupError, backup_postgres, backup_sqlite, sqlite_path
    from app.core.config import get_settings

    url = get_settings().database_url
    database = sqlite_path(url)
    try:
        if database is None:
            backup_postgres(url, path)
            typer.echo(f"{database_name()} dumped to {path} (pg_restore puts it back)")
            return
        size = backup_sqlite(database, path)
    except BackupError as error:
        _fail(str(error))
    typer.echo(f"{database} backed up to {path} ({size:,} bytes)")


@cli.command()
def restore(
    path: Annotated[Path, typer.Argument(help="A backup made by `steplabel backup`.")],
) -> None:
    """Put a SQLite backup in place of the database, with the app and the worker stopped;
    the database there before is kept beside it."""
    from app.backup import BackupError, restore_sqlite, sqlite_path
    from app.core import schema
    from app.core.config import get_settings

    database = sqlite_path(get_settings().database_url)
    if database is None:
        _fail(
            "restore puts back a SQLite backup; for Postgres use pg_restore into an empty "
            "database (README, Backup and restore)"
        )
        return
    try:
        restored = restore_sqlite(path, database)
    except BackupError as error:
        _fail(str(error))
        return
    typer.echo(f"restored {path} to {database} (schema revision {restored.revision})")
    if restored.replaced is not None:
        typer.echo(f"the database that was there is kept as {restored.replaced}")
        # Labels made after the backup are gone, and the next ones take their ids.
        typer.echo("pipelines that pull labels: pull once without --since")
    head = schema.head_revision()
    if restored.revision != head:
        typer.echo(f"the code needs revision {head}: run `steplabel migrate` before the app")


@cli.command("seed-demo")
def seed_demo(
    credentials: Annotated[
        Path, typer.Option(help="Where to keep the demo passwords (mode 600).")
    ] = Path("demo-credentials.txt"),
) -> None:
    """Create demo users (printing their passwords) and demo problems to label, once."""
    from app.core.db import transaction
    from app.datasets.demo_seed import seed

    _require_current_schema()
    with transaction() as session:
        report = seed(session)
    _print_seed_report(report, credentials)


def _print_seed_report(report: "SeedReport", credentials: Path) -> None:
    typer.echo(report.describe())
    if report.passwords:
        lines = [f"{name}\t{role}\t{password}" for name, role, password in report.passwords]
        credentials.write_text("name\trole\tpassword\n" + "\n".join(lines) + "\n")
        credentials.chmod(0o600)
        typer.echo(f"passwords kept in {credentials}")


Name = Annotated[str, typer.Argument(help="The user's login name.")]
PasswordOption = Annotated[
    str | None, typer.Option(help="The password; a random one is made and printed if absent.")
]


@users_cli.command("add")
def users_add(
    name: Name,
    role: Annotated[RoleName, typer.Option(help="labeler or admin.")] = RoleName.LABELER,
    password: PasswordOption = None,
    approved: Annotated[
        bool, typer.Option("--approved", help="Skip screening: regular tasks at once.")
    ] = False,
) -> None:
    """Create a user."""
    from app.auth import users
    from app.core.db import transaction
    from app.models import Role

    _require_current_schema()
    chosen = password or users.new_password()
    try:
        with transaction() as session:
            created = users.create_user(session, name, Role(role), chosen, approved=approved).name
    except ValueError as error:
        _fail(str(error))
    typer.echo(f"created {role.value} {created}" + ("" if password else f", password: {chosen}"))


@users_cli.command("list")
def users_list() -> None:
    """List users: name, role, active, approved, UUID."""
    from app.auth import users
    from app.core.db import transaction

    _require_current_schema()
    with transaction() as session:
        for user in users.list_users(session):
            state = "active" if user.is_active else "inactive"
            approval = "approved" if user.is_approved else "screening"
            typer.echo(f"{user.name}\t{user.role}\t{state}\t{approval}\t{user.uuid}")


def _change_user(action: str, name: str, *args: str) -> None:
    """One of the admins' changes to a user (app.auth.users.USER_CHANGES), in the audit log."""
    from app.auth import users
    from app.core.db import transaction

    _require_current_schema()
    try:
        with transaction() as session:
            users.change_user(session, None, action, name, *args)
    except LookupError as error:
        _fail(str(error.args[0]))
    except ValueError as error:  # a password too short
        _fail(str(error))


@users_cli.command("deactivate")
def users_deactivate(name: Name) -> None:
    """Deactivate a user: they are logged out at their next request."""
    _change_user("user.deactivate", name)
    typer.echo(f"deactivated {name}")


@users_cli.command("end-sessions")
def users_end_sessions(name: Name) -> None:
    """Log a user out everywhere (a lost laptop, a copied cookie); they can log in again."""
    _change_user("user.end_sessions", name)
    typer.echo(f"ended every session of {name}")


@users_cli.command("reactivate")
def users_reactivate(name: Name) -> None:
    """Let a deactivated user log in again (with the password they had)."""
    _change_user("user.reactivate", name)
    typer.echo(f"reactivated {name}")


@users_cli.command("approve")
def users_approve(name: Name) -> None:
    """Open regular tasks to a labeler after screening."""
    _change_user("user.approve", name)
    typer.echo(f"approved {name}")


@users_cli.command("reset-password")
def users_reset_password(name: Name, password: PasswordOption = None) -> None:
    """Set a new password (printed if made here) and end the user's sessions."""
    from app.auth import users

    chosen = password or users.new_password()
    _change_user("user.reset_password", name, chosen)
    typer.echo(f"password of {name} reset" + ("" if password else f": {chosen}"))


@qc_cli.command("add")
def qc_add(
    solution_id: Annotated[int, typer.Argument(help="The solution to serve to every labeler.")],
    label_id: Annotated[int, typer.Argument(help="Its gold label (for example an admin's).")],
) -> None:
    """Make a solution a quality-control question with a gold label."""
    from app.core.db import transaction
    from app.quality.questions import set_gold

    _require_current_schema()
    try:
        with transaction() as session:
            set_gold(session, None, solution_id, label_id)
    except (LookupError, ValueError) as error:
        _fail(str(error.args[0]))
    typer.echo(f"solution {solution_id} is a quality-control question (gold label {label_id})")


@qc_cli.command("remove")
def qc_remove(solution_id: Annotated[int, typer.Argument()]) -> None:
    """Stop serving a solution as a quality-control question."""
    from app.core.db import transaction
    from app.quality.questions import remove_gold

    _require_current_schema()
    try:
        with transaction() as session:
            remove_gold(session, None, solution_id)
    except LookupError as error:
        _fail(str(error.args[0]))
    typer.echo(f"solution {solution_id} is no longer a quality-control question")


@cli.command("train-now")
def train_now() -> None:
    """Ask the PRM worker for a training run as soon as it is free."""
    from app import audit, training
    from app.core.db import transaction

    _require_current_schema()
    with transaction() as session:
        run = training.request_run(session)
        audit.record(
            session, None, "prm.train", f"training run {run.id}", None, {"status": run.status}
        )
    typer.echo(f"training run {run.id} requested; `python -m worker` (make worker) runs it")


def main() -> None:
    try:
        cli()
    except Exception as error:
        # Settings are read (and app.core.config imported) only by the commands that need them.
        from app.core.config import SettingsError
        from app.core.db import is_database_away

        if isinstance(error, SettingsError):
            typer.echo(str(error), err=True)
            sys.exit(2)
        if is_database_away(error):  # a restart, a lost connection
            typer.echo(
                f"{database_failure(error)}\nrun the command again once it answers", err=True
            )
            sys.exit(DATABASE_FAILED)
        raise
