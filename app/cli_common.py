"""What every part of the command line shares: failing with a message (and the status of a
database that failed mid-command), refusing to run on a schema that is not current, and
writing an output file only once it is whole. Light, as ``steplabel --help`` must stay."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

# The export filters `steplabel export` and `steplabel remote pull` both take.
LabelerOption = Annotated[
    list[str] | None,
    typer.Option("--labeler", help="Only this labeler, by UUID or name (repeatable)."),
]
IncludeQcOption = Annotated[
    bool, typer.Option("--include-qc/--exclude-qc", help="Quality-control labels.")
]
IncludeScreeningOption = Annotated[
    bool, typer.Option("--include-screening/--exclude-screening", help="Screening labels.")
]


DATABASE_FAILED = 75
"""Exit status of a command the database failed under (a restart, a lost connection):
sysexits' EX_TEMPFAIL, since running it again once the database answers is the cure. A bad
input line is 1, a bad option or an unreachable database at the start 2."""


def fail(message: str, status: int = 1) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(status)


def database_failure(error: BaseException) -> str:
    """One line for a database error: the driver's first line, without SQLAlchemy's SQL."""
    from app.core.db import first_line

    return f"the database {database_name()} failed: {first_line(error)}"


@contextmanager
def replaced_when_whole(path: Path) -> Iterator[Path]:
    """A file beside ``path`` to write, which takes ``path``'s place once the block ends
    without an error: a command that fails leaves ``path`` as it was (a previous export, say),
    never empty or cut short."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    try:
        yield partial
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def database_name() -> str:
    """The configured database's URL, its password hidden."""
    from sqlalchemy.engine import make_url

    from app.core.config import get_settings

    return make_url(get_settings().database_url).render_as_string(hide_password=True)


def require_current_schema() -> None:
    """Stop with one line, not a traceback, where the database is out of reach (no server
    there, no folder for the file) or its schema is not the code's."""
    from sqlalchemy.exc import OperationalError

    from app.core import schema
    from app.core.db import get_engine

    try:
        schema.check_current(get_engine())
    except OperationalError as error:
        fail(f"cannot open the database {database_name()}: {error.orig}", 2)
    except schema.SchemaOutOfDate as error:
        fail(str(error), 2)
