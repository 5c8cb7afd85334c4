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


def require_current_schema() -> None:
    from app.core import schema
    from app.core.db import get_engine

    try:
        schema.check_current(get_engine())
    except schema.SchemaOutOfDate as error:
        fail(str(error), 2)
