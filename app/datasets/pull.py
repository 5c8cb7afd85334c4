"""Pulling labels: the filters and cursor of a pull checked, its window fixed, its lines
streamed. The API's pull (app/api/router.py) and the admin's Export page share it."""

from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.datasets import export
from app.datasets.cursor import pull_window
from app.datasets.export import ExportFilter
from app.pull_options import PullOptions
from app.read_ahead import read_ahead, read_side_by_side

CURSOR_HEADER = "X-Steplabel-Next-Cursor"
COUNT_HEADER = "X-Steplabel-Labels"


class PullError(ValueError):
    """The pull cannot be made as asked (a bad cursor, an unknown labeler, ...)."""


@dataclass(frozen=True)
class Pull:
    """A pull whose window is fixed: ``lines()`` streams it, ``next_cursor`` follows it."""

    engine: Engine
    label_filter: ExportFilter
    export_format: str
    labels: int | None
    """Labels in the window that the filters select (the client's progress total); None
    for a consensus pull, whose lines, one per solution with a consensus, are known only
    once written."""
    next_cursor: str

    def lines(self) -> Iterator[str]:
        """The pull's text, chunk by chunk. On Postgres the next chunks are read while the
        current one is sent, by two threads at once where the chunks are PRM800K lines
        (``read_side_by_side``; else ``read_ahead``): the server's work, most of a pull's,
        runs in server processes of their own beside ours. SQLite's work runs in this
        process, under its lock: a reading thread there showed no gain (BENCHMARKS.md,
        issue 40, "reading ahead")."""
        if self.engine.dialect.name != "postgresql":
            return export.stream_export(self.engine, self.label_filter, self.export_format)
        if self.export_format == "prm800k" and not self.label_filter.consensus:
            return read_side_by_side(export.stored_line_reads(self.engine, self.label_filter))
        return read_ahead(export.stream_export(self.engine, self.label_filter, self.export_format))

    def headers(self) -> dict[str, str]:
        """What a response streaming the pull says about it: the next cursor, the count."""
        counted = {} if self.labels is None else {COUNT_HEADER: str(self.labels)}
        return {CURSOR_HEADER: self.next_cursor, **counted}


def plan_pull(session: Session, options: PullOptions) -> Pull:
    """Check a pull's options and fix its window now, in ``session`` (a request's: on
    SQLite a second transaction would wait for its lock); PullError says what is wrong.

    ``session`` must not have written: on Postgres its own transaction would hold the
    horizon back. The lines are read later, in transactions of their own.
    """
    unknown = export.unknown_labelers(session, options.labeler)
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise PullError(f"labeler: no user has the name or UUID {names}")
    try:
        window = pull_window(session, options.since)
    except ValueError as error:
        raise PullError(str(error)) from None
    label_filter = ExportFilter(
        generations=[g if isinstance(g, int) else None for g in options.generation],
        labelers=options.labeler,
        include_quality_control=options.include_qc,
        include_screening=options.include_screening,
        window=window,
        consensus=options.consensus,
    )
    if options.consensus and options.since is not None:
        # Votes span cursors: a new label can change a solution pulled before.
        raise PullError(
            "a consensus pull is the whole consensus as of now: pull it without since "
            "(one line per solution; a later pull's line for a solution replaces this one's)"
        )
    if options.consensus and options.format != "prm800k":
        raise PullError("a consensus pull writes PRM800K lines: format=prm800k")
    count = None if options.consensus else export.count_labels(session, label_filter)
    return Pull(_engine_of(session), label_filter, options.format, count, window.next_cursor)


def _engine_of(session: Session) -> Engine:
    bind = session.get_bind()
    return bind if isinstance(bind, Engine) else bind.engine
