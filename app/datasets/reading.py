"""Reading JSONL input line by line, and reporting a bad line as ``FILE:LINE: message``."""

import codecs
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

from pydantic import ValidationError
from pydantic_core import from_json

from app.progress import Progress

T = TypeVar("T")


class ImportLineError(Exception):
    """One input line is invalid; ``str()`` gives ``FILE:LINE: what is wrong``."""

    def __init__(self, source: str, line: int, message: str) -> None:
        super().__init__(f"{source}:{line}: {message}" if line else f"{source}: {message}")
        self.source = source
        self.line = line
        self.message = message


@dataclass(frozen=True)
class SourceLine:
    source: str
    number: int
    text: str
    unreadable: str | None = None
    """Why the raw bytes could not be read as text, if they could not."""

    def error(self, message: str) -> ImportLineError:
        return ImportLineError(self.source, self.number, message)


def _blank(raw: bytes) -> bool:
    """Whether a line holds whitespace alone (any Unicode space); one that is not UTF-8 is
    not blank: it is read, and is a line error."""
    stripped = raw.strip()
    if not stripped or b"!" <= stripped[:1] <= b"~":
        return not stripped  # nearly every line: empty, or it starts with { or [
    try:
        return not stripped.decode("utf-8").strip()
    except UnicodeDecodeError:
        return False


MAX_LINE_BYTES = 64 << 20
"""The longest line read (a PRM800K line is a few kilobytes): a longer one is a line error,
never read whole, as a 2 GiB upload of one line would take several times that in memory."""


def _raw_lines(stream: BinaryIO) -> Iterator[bytes]:
    """The stream's lines, each cut after ``MAX_LINE_BYTES`` + 1 bytes: the rest of a longer
    one is skipped, a chunk at a time, to its end."""
    limit = MAX_LINE_BYTES  # read once: a test may lower it
    while raw := stream.readline(limit + 1):
        if len(raw) > limit and not raw.endswith(b"\n"):
            while (rest := stream.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
        yield raw


def _overlong(raw: bytes) -> bool:
    return len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES


def _lines_read(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a stream as bytes, numbered from 1 (blank ones count in the
    numbers), without a byte-order mark at the start; an overlong one cut (``_raw_lines``)."""
    for number, raw in enumerate(_raw_lines(stream), start=1):
        if number == 1:
            # Windows editors start a UTF-8 file with a byte-order mark: it marks the file,
            # not its first line, which JSON would refuse at column 1.
            raw = raw.removeprefix(codecs.BOM_UTF8)
        if not _blank(raw):
            yield number, raw


def read_jsonl(
    name: str, stream: BinaryIO, progress: Progress | None = None
) -> Iterator[SourceLine]:
    """The non-blank lines of a JSONL stream, numbered from 1; bad UTF-8 is a line error,
    a byte-order mark at the start is dropped.

    ``progress`` advances by every line read: blank ones are skipped, not read, and neither
    ``count_lines`` nor an import's summary counts them.
    """
    for number, raw in _lines_read(stream):
        if progress is not None:
            progress.advance()
        if _overlong(raw):
            message = f"the line is longer than {MAX_LINE_BYTES} bytes"
            yield SourceLine(name, number, "", message)
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            replaced = raw.decode("utf-8", "replace")
            yield SourceLine(name, number, replaced, f"not UTF-8 text ({error.reason})")
            continue
        yield SourceLine(name, number, text)


def read_files(
    paths: Iterable[str | Path], progress: Progress | None = None
) -> Iterator[SourceLine]:
    """Every line of every file in order; ``-`` reads standard input."""
    for path in paths:
        if str(path) == "-":
            yield from read_jsonl("<stdin>", sys.stdin.buffer, progress)
            continue
        try:
            stream = open(path, "rb")  # noqa: SIM115 - closed below, after streaming
        except OSError as error:
            raise ImportLineError(str(path), 0, f"cannot open: {error.strerror}") from None
        with stream:
            yield from read_jsonl(str(path), stream, progress)


def count_lines(stream: BinaryIO) -> int:
    """The lines read_jsonl reads from ``stream``, blank ones aside, for a progress total."""
    return sum(1 for _ in _lines_read(stream))


def count_file_lines(paths: Iterable[str | Path]) -> int | None:
    """The lines of all these files, or None when one is standard input or unreadable."""
    total = 0
    for path in paths:
        if str(path) == "-":
            return None
        try:
            with open(path, "rb") as stream:
                total += count_lines(stream)
        except OSError:
            return None
    return total


def decode_json(line: SourceLine) -> object:
    """The line's JSON value; invalid JSON (nesting past 200 deep too) is a line error."""
    if line.unreadable:
        raise line.error(line.unreadable)
    try:
        return from_json(line.text)
    except ValueError as error:
        raise line.error(json_problem(str(error))) from None


def describe(error: ValidationError) -> str:
    """Pydantic's errors as ``field.path: message`` pairs, the first few only."""
    first = error.errors()[0]
    if first["type"] == "json_invalid":
        return json_problem(str(first["ctx"]["error"]))
    parts = []
    for problem in error.errors()[:3]:
        location = ".".join(str(part) for part in problem["loc"] if part not in _UNION_TAGS)
        message = problem["msg"].removeprefix("Value error, ")
        parts.append(f"{location}: {message}" if location else message)
    more = len(error.errors()) - 3
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def json_problem(message: str) -> str:
    """The JSON parser's ``message`` in a reader's words. A line that stops before its value
    does (a file cut short, a line split in two) says so: the parser reports it as an early
    end, or as the line's newline found inside a string ("control character found")."""
    after_the_line = re.search(r" at line (\d+) column \d+$", message)
    if message.startswith("EOF while parsing") or (
        after_the_line is not None and int(after_the_line.group(1)) > 1
    ):
        inside = re.search(r"while parsing (an? \w+)", message)
        where = f": it ends inside {inside.group(1)}" if inside else ""
        return f"the line is not complete JSON{where} (was the file cut short?)"
    return f"invalid JSON: {_json_position(message)}"


def _json_position(message: str) -> str:
    # The parser counts lines inside the one line it was given; only the column helps.
    message = re.sub(r" at line 1 column (\d+)$", r" at column \1", message)
    return re.sub(r" at line \d+ column \d+$", " at the end of the line", message)


# Tag names of unions, which show in error locations but are not fields: the question's
# phases, and the kinds of a JSON value (a human completion's extra keys).
_UNION_TAGS = {"phase1", "phase2", "list", "dict", "str", "int", "float", "bool"}


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of up to ``size`` items (itertools.batched arrives only in Python 3.12)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
