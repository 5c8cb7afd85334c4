"""Progress of long work: rows counted as they are done, shown now and then.

``Progress`` counts and hands the count to a ``show`` function at most every ``interval``
seconds (and once at the end), so per-row work stays one addition and a clock read.
``terminal_progress`` shows it as a bar on standard error, only when that is a terminal:
piped or redirected output gets nothing. The admin's upload jobs show it on the page.
"""

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

BAR_WIDTH = 24
REDRAW_SECONDS = 0.1


class Progress:
    """Rows done so far, passed to ``show`` at most every ``interval`` seconds."""

    def __init__(self, show: Callable[[int], None], interval: float) -> None:
        self.done = 0
        self.show = show
        self.interval = interval
        self._next_show = 0.0

    def advance(self, rows: int = 1) -> None:
        self.done += rows
        now = time.monotonic()
        if now >= self._next_show:
            self._next_show = now + self.interval
            self.show(self.done)

    def finish(self) -> None:
        """Show the final count, however recently the last one was shown."""
        self.show(self.done)


class TerminalBar:
    """One line on a terminal, redrawn in place: ``what [###...] 42% 420/1,000 lines 9 lines/s``."""

    def __init__(self, stream: TextIO, what: str, unit: str, total: int | None) -> None:
        self.stream = stream
        self.what = what
        self.unit = unit
        self.total = total
        self.started = time.monotonic()
        self.drawn = False

    def line(self, done: int, seconds: float) -> str:
        rate = f"{done / seconds:,.0f} {self.unit}/s" if seconds > 0 else f"- {self.unit}/s"
        if not self.total:
            return f"{self.what}  {done:,} {self.unit}  {rate}  {_clock(seconds)}"
        share = min(done / self.total, 1.0)
        filled = round(share * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        counts = f"{done:,}/{self.total:,} {self.unit}"
        return f"{self.what}  [{bar}] {share:4.0%}  {counts}  {rate}  {_clock(seconds)}"

    def draw(self, done: int) -> None:
        text = self.line(done, time.monotonic() - self.started)
        # Cut to the terminal's width: a wrapped line could not be redrawn in place.
        self.stream.write("\r" + text[: _columns(self.stream) - 1] + "\x1b[K")
        self.stream.flush()
        self.drawn = True

    def note(self, message: str) -> None:
        """Print a message on its own line; the bar is redrawn below it at the next count."""
        self.stream.write(("\r\x1b[K" if self.drawn else "") + message + "\n")
        self.stream.flush()
        self.drawn = False

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


class TerminalProgress(Progress):
    """A Progress drawn as a TerminalBar; ``note`` prints past it."""

    def __init__(self, bar: TerminalBar) -> None:
        super().__init__(bar.draw, REDRAW_SECONDS)
        self.bar = bar

    def note(self, message: str) -> None:
        self.bar.note(message)


@contextmanager
def terminal_progress(
    what: str,
    unit: str,
    total: Callable[[], int | None],
    stream: TextIO | None = None,
    quiet: bool = False,
) -> Iterator[TerminalProgress | None]:
    """A bar on ``stream`` (standard error) if it is a terminal, else (or if ``quiet``) None.

    ``total`` is called only when the bar is shown, so a piped run never pays for counting.
    The bar ends with its last count and a newline, also when the work fails.
    """
    stream = stream or sys.stderr
    if quiet or not stream.isatty():
        yield None
        return
    bar = TerminalBar(stream, what, unit, total())
    progress = TerminalProgress(bar)
    try:
        yield progress
    finally:
        # Where the work stopped, also when it failed.
        progress.finish()
        bar.close()


def _clock(seconds: float) -> str:
    minutes, second = divmod(int(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}:{minute:02d}:{second:02d}" if hours else f"{minute}:{second:02d}"


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError):
        return 80
