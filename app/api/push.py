"""Pushing a batch of problems, solutions or PRM800K labels: the body spooled as JSONL and
imported as a background job (app/admin/import_jobs.py), all or nothing, idempotent by
content (the importers match rows by content, so a batch sent again adds nothing)."""

import json
import tempfile
from typing import BinaryIO

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
    try:
        document = json.load(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise PushError(f"the body is not a JSON document: {error}") from None
    items = document if isinstance(document, list) else [document]
    converted = tempfile.TemporaryFile(prefix="steplabel-push-")  # noqa: SIM115 (outlives us)
    for item in items:
        converted.write(json.dumps(item, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        converted.write(b"\n")
    converted.seek(0)
    body.close()
    return converted


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
