"""What every part of the command line shares: failing with a message, and refusing to run
on a schema that is not current. Light, as ``steplabel --help`` must stay."""

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


def fail(message: str, status: int = 1) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(status)


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
