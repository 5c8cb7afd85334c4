"""Progress bars: drawn on a terminal (a real pseudo-terminal here), silent when piped."""

import codecs
import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

from sqlalchemy import Engine

from app.datasets.reading import count_file_lines, count_lines, read_jsonl
from app.progress import Progress, TerminalBar, terminal_progress
from tests import factories

STEPLABEL = [sys.executable, "-c", "from app.cli import main; main()"]


def run_on_terminal(args: list[str]) -> tuple[int, str, str]:
    """Run steplabel with standard error on a pseudo-terminal: (status, stdout, terminal)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [*STEPLABEL, *args], stdout=subprocess.PIPE, stderr=terminal, stdin=subprocess.DEVNULL
    )
    os.close(terminal)
    shown = bytearray()
    reader = threading.Thread(target=_read_all, args=(controller, shown))
    reader.start()
    stdout, _ = process.communicate(timeout=120)
    reader.join(timeout=10)
    os.close(controller)
    return process.returncode, stdout.decode(), shown.decode()


def _read_all(controller: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: every writer closed the terminal
            return
        if not chunk:
            return
        into.extend(chunk)


def run_piped(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STEPLABEL, *args], capture_output=True, text=True, timeout=120, check=False
    )


def labels_file(tmp_path: Path) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(factories.line(r) for r in factories.edge_case_records()) + "\n")
    return path


def test_import_and_export_draw_a_bar_on_a_terminal(engine: Engine, tmp_path: Path) -> None:
    source = labels_file(tmp_path)
    status, stdout, terminal = run_on_terminal(["import", "prm800k", str(source)])
    assert status == 0, terminal
    assert "10 labels added" in stdout
    # Ten records and a blank line at the end, skipped: ten lines read, as the summary says.
    assert "importing  [########################] 100%  10/10 lines" in terminal
    assert "lines/s" in terminal and "\r" in terminal

    target = tmp_path / "export.jsonl"
    status, _, terminal = run_on_terminal(["export", "-o", str(target)])
    assert status == 0, terminal
    assert "exporting  [########################] 100%  10/10 labels" in terminal
    assert "wrote 10 lines" in terminal


def test_piped_runs_print_no_bar(engine: Engine, tmp_path: Path) -> None:
    source = labels_file(tmp_path)
    imported = run_piped(["import", "prm800k", str(source)])
    assert imported.returncode == 0 and imported.stderr == ""
    exported = run_piped(["export", "-o", str(tmp_path / "export.jsonl")])
    assert exported.returncode == 0
    assert exported.stderr.startswith("wrote 10 lines") and "\r" not in exported.stderr


def test_a_failed_import_ends_the_bar_before_its_error(engine: Engine, tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(factories.line(factories.record()) + "not json\n")
    status, _, terminal = run_on_terminal(["import", "prm800k", str(source)])
    assert status == 1
    # The error starts its own line; the bar stopped at the bad line.
    assert "2/2 lines" in terminal
    assert f"\r\n{source}:2: invalid JSON" in terminal and "nothing was imported" in terminal


def test_the_bar_counts_and_fits_the_line() -> None:
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
    with (
        open(terminal, "w") as stream,
        terminal_progress("copying", "rows", lambda: 4, stream) as bar,
    ):
        assert bar is not None
        for _ in range(3):
            bar.advance()
        bar.note("row 2 was odd")
    shown = bytearray()
    _read_all(controller, shown)
    os.close(controller)
    text = shown.decode()
    assert "\x1b[Krow 2 was odd\r\n" in text
    *_, last, end = text.split("\r")
    assert last.startswith("copying  [##################......]  75%  3/4 rows  ")
    # Cut to 59 columns: a line as wide as the terminal would wrap, and not redraw in place.
    assert len(last.removesuffix("\x1b[K")) == 59 and end == "\n"


def test_no_total_shows_rows_and_rate() -> None:
    bar = TerminalBar(sys.stderr, "reading", "lines", None)
    assert bar.line(1500, 2.0) == "reading  1,500 lines  750 lines/s  0:02"
    with_total = TerminalBar(sys.stderr, "reading", "lines", 3000)
    assert with_total.line(1500, 3725.0).endswith(" 50%  1,500/3,000 lines  0 lines/s  1:02:05")


def test_not_a_terminal_means_no_progress(tmp_path: Path) -> None:
    counted = []
    with (
        open(tmp_path / "log", "w") as stream,
        terminal_progress("x", "rows", lambda: counted.append(1) or 1, stream) as bar,
    ):
        assert bar is None
    assert counted == []  # the total is not even counted


def test_progress_shows_now_and_then_and_at_the_end() -> None:
    shown: list[int] = []
    progress = Progress(shown.append, interval=3600)
    for _ in range(5):
        progress.advance()
    progress.finish()
    assert shown == [1, 5]


def test_lines_are_counted_as_read_jsonl_reads_them(tmp_path: Path) -> None:
    """Blank lines (whitespace alone, a byte-order mark on the first) are skipped, not
    read, nor counted; a line that is not UTF-8 is read, and fails."""
    path = tmp_path / "a.jsonl"
    cases = [
        (b"", 0),
        (b"{}", 1),
        (b"{}\n", 1),
        (b"{}\n\n{}", 2),
        (codecs.BOM_UTF8 + b"\n \t\r\n{}\n" + "\u3000\n".encode(), 1),
        (b"\xff\n{}", 2),
    ]
    for content, lines in cases:
        path.write_bytes(content)
        with open(path, "rb") as stream:
            assert count_lines(stream) == lines
        with open(path, "rb") as stream:
            assert len(list(read_jsonl("a.jsonl", stream))) == lines
    assert count_file_lines([path, path]) == 4
    assert count_file_lines([path, "-"]) is None
    assert count_file_lines([tmp_path / "missing.jsonl"]) is None
