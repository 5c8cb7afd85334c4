"""``steplabel tokens`` (API tokens, on the server) and ``steplabel remote`` (the API's
client, from anywhere): the command line's half of app/api and app/client.py.

As in app/cli.py, each command imports what it needs when it runs, so that
``steplabel --help`` stays light.
"""

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, BinaryIO

import typer

from app.cli_common import (
    IncludeQcOption,
    IncludeScreeningOption,
    LabelerOption,
    replaced_when_whole,
)
from app.cli_common import fail as _fail
from app.cli_common import require_current_schema as _require_current_schema
from app.progress import TerminalProgress, terminal_progress

if TYPE_CHECKING:
    from pydantic import ValidationError

tokens_cli = typer.Typer(help="API tokens for the JSON API (/api/v1).", no_args_is_help=True)
remote_cli = typer.Typer(
    help="Push to and pull from a steplabel server through its JSON API.", no_args_is_help=True
)

Url = Annotated[
    str,
    typer.Option(envvar="STEPLABEL_URL", help="The server, e.g. http://127.0.0.1:8000."),
]
Token = Annotated[
    str,
    typer.Option(
        envvar="STEPLABEL_TOKEN",
        help="An API token (or set STEPLABEL_TOKEN, which keeps it out of the process list).",
        show_envvar=True,
    ),
]


@tokens_cli.command("create")
def tokens_create(
    name: Annotated[str, typer.Argument(help="What the token is for, e.g. 'pipeline'.")],
    scopes: Annotated[str, typer.Option(help="Comma-separated: import, export, read.")] = "read",
    user: Annotated[
        str | None,
        typer.Option(help="The user the token acts as (default: the one active admin)."),
    ] = None,
    expires_days: Annotated[
        int | None, typer.Option(min=1, help="Days until the token expires (default: never).")
    ] = None,
) -> None:
    """Make an API token; it is printed once, alone on the last line, and kept only hashed."""
    from app.auth import tokens
    from app.auth.users import user_by_name
    from app.core.db import transaction

    _require_current_schema()
    try:
        chosen = tokens.parse_scopes(scopes)
        with transaction() as session:
            owner = tokens.sole_admin(session) if user is None else user_by_name(session, user)
            expires = tokens.expiry_in(expires_days)
            token, secret = tokens.create_token(session, owner, name, chosen, expires_at=expires)
            described = f"token {token.id} {token.name!r} for {owner.name} ({token.scopes})"
    except (LookupError, ValueError) as error:
        _fail(str(error.args[0]))
    typer.echo(f"created {described}; it is shown only now:")
    typer.echo(secret)


@tokens_cli.command("list")
def tokens_list() -> None:
    """List tokens: id, name, user, scopes, state, created, expires, last used."""
    from app.auth import tokens
    from app.core.db import transaction

    _require_current_schema()
    with transaction() as session:
        for view in tokens.list_tokens(session):
            token = view.token
            fields = [
                str(token.id),
                token.name,
                view.user_name,
                token.scopes,
                view.state,
                f"{token.created_at:%Y-%m-%d %H:%M}",
                f"{token.expires_at:%Y-%m-%d %H:%M}" if token.expires_at else "never expires",
                f"used {token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "unused",
            ]
            typer.echo("\t".join(fields))


@tokens_cli.command("revoke")
def tokens_revoke(
    token_id: Annotated[int, typer.Argument(help="The id `tokens list` shows.")],
) -> None:
    """Revoke a token: refused from its next request on."""
    from app.auth import tokens
    from app.core.db import transaction

    _require_current_schema()
    try:
        with transaction() as session:
            revocation = tokens.revoke_token(session, token_id)
            said = revocation.describe()
    except LookupError as error:
        _fail(str(error.args[0]))
    typer.echo(said)


@remote_cli.command("push")
def remote_push(
    file: Annotated[Path, typer.Argument(help="JSONL (or a .json array) to import.")],
    url: Url,
    token: Token,
    kind: Annotated[
        str, typer.Option(help="solutions, problems or prm800k (what `import` takes).")
    ] = "solutions",
    generation: Annotated[int, typer.Option(help="Solutions: the generation to queue in.")] = 0,
    queue: Annotated[
        bool, typer.Option("--queue/--no-queue", help="Solutions: join the labeling queue.")
    ] = True,
    batch_lines: Annotated[
        int, typer.Option(min=1, help="Lines per batch (one import job each, all or nothing).")
    ] = 5000,
) -> None:
    """Push a file in batches and wait for each batch's import job: exit 0 once all
    succeeded, 1 with the bad lines (FILE:LINE: message) otherwise."""
    from app import client

    if not file.is_file():
        _fail(f"{file}: {'a folder, not a file' if file.is_dir() else 'no such file'}", 2)
    try:
        with (
            client.Client(url, token) as api,
            terminal_progress("pushing", "lines", lambda: client.count_lines(file)) as bar,
        ):
            result = api.push_file(
                file,
                kind=kind,
                generation=generation,
                queue=queue,
                batch_lines=batch_lines,
                progress=bar.advance if bar else None,
            )
    except client.ApiError as error:
        _fail(str(error))
    except ValueError as error:  # a .json file that does not parse
        _fail(f"{file}: {error}")
    if not result.jobs:
        typer.echo(f"{file} has no lines: nothing pushed")
    for job in result.jobs:
        typer.echo(f"import job {job['id']} {job['status']}: {job['summary'] or ''}".rstrip(": "))
    if not result.succeeded:
        for error_line in result.errors:
            typer.echo(error_line, err=True)
        lines_at_fault = any(error.get("line") for error in result.jobs[-1]["errors"])
        cure = "fix the line and push again" if lines_at_fault else "push the file again"
        _fail(f"{file}: the failed batch imported nothing; {cure}")


@remote_cli.command("pull")
def remote_pull(
    out: Annotated[str, typer.Argument(help="File to write, '-' for standard output.")],
    url: Url,
    token: Token,
    since: Annotated[
        str | None, typer.Option(help="The cursor the last pull printed: only newer labels.")
    ] = None,
    consensus: Annotated[
        bool, typer.Option("--consensus", help="One consensus label per solution.")
    ] = False,
    export_format: Annotated[str, typer.Option("--format", help="prm800k or trl.")] = "prm800k",
    generation: Annotated[
        list[int] | None, typer.Option(help="Only these generations (repeatable).")
    ] = None,
    labeler: LabelerOption = None,
    include_qc: IncludeQcOption = True,
    include_screening: IncludeScreeningOption = True,
) -> None:
    """Write the labels (since a cursor) as PRM800K JSONL, the same bytes `steplabel
    export` writes, and print the next cursor alone on the last line."""
    from pydantic import ValidationError

    from app import client
    from app.pull_options import PullOptions

    try:
        options = PullOptions(
            format=export_format,  # checked here, as the server checks it
            since=since,
            generation=generation or [],
            labeler=labeler or [],
            consensus=consensus,
            include_qc=include_qc,
            include_screening=include_screening,
        )
    except ValidationError as error:
        _fail(_option_errors(error), 2)
    try:
        with (
            _binary_output(out) as stream,
            client.Client(url, token) as api,
            terminal_progress("pulling", "labels", lambda: None, quiet=out == "-") as bar,
        ):
            result = api.pull(
                stream, options, on_total=_set_total(bar), progress=bar.advance if bar else None
            )
    except client.ApiError as error:
        _fail(str(error))
    except OSError as error:
        _fail(f"cannot write {out}: {error.strerror or error}")
    typer.echo(f"wrote {result.labels} lines to {out}; next cursor:", err=True)
    typer.echo(result.next_cursor)


def _option_errors(error: "ValidationError") -> str:
    """A pull's bad options, one line each, as the command line names them."""
    flags = {"format": "--format"}
    return "\n".join(
        f"{flags.get(str(e['loc'][0]), '--' + str(e['loc'][0]).replace('_', '-'))}: {e['msg']}"
        for e in error.errors()
    )


@contextmanager
def _binary_output(out: str) -> Iterator[BinaryIO]:
    """``out`` opened for bytes, or standard output's bytes for '-'. A file is written
    beside ``out`` and takes its place once the pull is whole (``replaced_when_whole``)."""
    if out == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with replaced_when_whole(Path(out)) as partial, open(partial, "wb") as stream:
        yield stream


def _set_total(bar: TerminalProgress | None) -> Callable[[int], None]:
    """Give the bar its total once the server has said it."""

    def set_total(total: int) -> None:
        if bar is not None:
            bar.bar.total = total

    return set_total
