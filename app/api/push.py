"""Pushing a batch of problems, solutions or PRM800K labels: the body spooled as JSONL and
imported as a background job (app/admin/import_jobs.py), all or nothing, idempotent by
content (the importers match rows by content, so a batch sent again adds nothing)."""

import codecs
import json
import re
import tempfile
from collections.abc import Iterator
from typing import Any, BinaryIO

from sqlalchemy.orm import Session

from app import audit
from app.admin import import_jobs
from app.admin.imports import UploadOptions
from app.auth.tokens import TokenHolder
from app.models import ImportJob, User

JSON_TYPES = ("application/json",)
"""Content types read as one JSON document: an array of lines' objects, or one object."""


class PushError(ValueError):
    """The batch cannot be queued; the message says why."""


def as_jsonl(body: BinaryIO, content_type: str) -> BinaryIO:
    """The batch as JSONL: a JSON array becomes one line per item (line N is item N, from
    1), JSONL stays as it is. PushError for a JSON body that does not parse."""
    if content_type.split(";")[0].strip().lower() not in JSON_TYPES:
        return body
    converted = tempfile.TemporaryFile(prefix="steplabel-push-")  # noqa: SIM115 (outlives us)
    try:
        for item in json_items(body):
            line = json.dumps(item, ensure_ascii=False).encode("utf-8", "surrogatepass")
            converted.write(line + b"\n")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        converted.close()
        raise PushError(f"the body is not a JSON document: {error}") from None
    converted.seek(0)
    body.close()
    return converted


CHUNK_CHARS = 1 << 20
"""Characters read at a time: a batch of gigabytes is parsed an item at a time, never held
whole (a parsed JSON document takes several times its size in memory)."""
_SPACE = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL = re.compile(r"[0-9eE.+-]*\Z")


def json_items(body: BinaryIO, chunk_chars: int = CHUNK_CHARS) -> Iterator[Any]:
    """The items of the JSON array in ``body``, one at a time, or the one value that is
    not an array. UnicodeDecodeError or json.JSONDecodeError where it does not parse."""
    text = _JsonText(body, chunk_chars)
    if text.next_char() != "[":
        yield text.value()
        text.expect("")
        return
    text.expect("[")
    if text.next_char() == "]":
        text.expect("]")
    else:
        while True:
            yield text.value()
            if text.next_char() == "]":
                text.expect("]")
                break
            text.expect(",")
    text.expect("")


class _JsonText:
    """UTF-8 JSON text (a byte-order mark allowed) read from a stream a chunk at a time."""

    def __init__(self, stream: BinaryIO, chunk_chars: int) -> None:
        self.stream = stream
        self.chunk_chars = chunk_chars
        self.utf8 = codecs.getincrementaldecoder("utf-8-sig")()
        self.decoder = json.JSONDecoder()
        self.text = ""
        self.at = 0
        self.ended = False

    def _read(self, chars: int | None = None) -> None:
        """Drop what was parsed, then add about ``chars`` more characters (a chunk's)."""
        chunk = self.stream.read(chars or self.chunk_chars)
        self.ended = not chunk
        self.text = self.text[self.at :] + self.utf8.decode(chunk, final=self.ended)
        self.at = 0

    def next_char(self) -> str:
        """The next character past white space, not taken; "" at the end."""
        while True:
            space = _SPACE.match(self.text, self.at)  # it always matches, if only ""
            self.at = space.end() if space else self.at
            if self.at < len(self.text) or self.ended:
                return self.text[self.at : self.at + 1]
            self._read()

    def expect(self, char: str) -> None:
        """Take ``char`` ("": the end of the text), or raise the parser's error."""
        if self.next_char() != char:
            wanted = "the end" if not char else repr(char)
            raise json.JSONDecodeError(f"expected {wanted}", self.text, self.at)
        self.at += len(char)

    def value(self) -> Any:
        """The JSON value that starts at the next character, taken."""
        self.next_char()
        more = self.chunk_chars
        while True:
            try:
                value, end = self.decoder.raw_decode(self.text, self.at)
            except json.JSONDecodeError:
                if self.ended:
                    raise
                end = len(self.text)  # a value longer than the text read so far
            # A number may go on past what was read ("1" of "1e5" cut after the "1e"): only
            # a character after it that cannot continue it tells where it ends.
            if self.ended or not _NUMBER_TAIL.match(self.text, end):
                self.at = end
                return value
            self._read(more)
            more *= 2  # each retry parses the value from its start: read ever more


def queue_batch(
    session: Session, body: BinaryIO, name: str, options: UploadOptions, holder: TokenHolder
) -> tuple[ImportJob, BinaryIO]:
    """Spool the batch and add its queued job (flushed), with its audit entry; (the job, the
    file to hand to ``import_jobs.RUNNER`` once the job's row is committed). PushError for a
    bad name."""
    try:
        filename = import_jobs.job_file_name(name)
    except ValueError as error:
        raise PushError(str(error)) from None
    job, upload = import_jobs.queue_upload(session, body, filename, options, holder.user_id)
    after = {
        "job": job.id,
        "kind": options.kind,
        "generation": options.generation,
        "queue": options.queue,
        "token": holder.token_id,
    }
    actor = session.get_one(User, holder.user_id)
    audit.record(session, actor, "import.push", f"batch {filename}", None, after)
    return job, upload


def line_error(text: str, filename: str) -> tuple[int | None, str]:
    """(line, message) of an import's ``FILE:LINE: message``; (None, text) for another."""
    if text.startswith(filename + ":"):
        number, separator, message = text[len(filename) + 1 :].partition(": ")
        if separator and number.isdigit():
            return int(number), message
    return None, text
