"""Uploads of the JSONL files ``steplabel import`` reads, through the same importers.

The upload is read line by line from a file on disk as it is imported (in the background:
app/admin/import_jobs.py), inside a savepoint: the first invalid line raises
``FILE:LINE: message`` exactly as the CLI prints it, and everything the upload wrote is
rolled back. With ``skip_invalid`` bad lines are listed and the rest is imported.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import PurePath
from typing import BinaryIO

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.datasets import importing
from app.datasets.reading import ImportLineError, read_jsonl
from app.progress import Progress

IMPORT_KINDS = {
    "prm800k": "PRM800K labels",
    "problems": "MATH problems",
    "solutions": "Model solutions to label",
}
SKIPPED_SHOWN = 100
"""Skipped lines listed on the page; the rest are only counted."""
CONCURRENT_IMPORT = (
    "another import added the same rows at the same time. "
    "Upload the file again: rows already there are skipped."
)


@dataclass(frozen=True)
class UploadOptions:
    kind: str
    skip_invalid: bool = False
    generation: int = 0
    """Solutions only: the generation new solutions are queued in (-1: screening)."""
    queue: bool = True
    """Solutions only: put new solutions in the labeling queue."""

    def __post_init__(self) -> None:
        if self.kind not in IMPORT_KINDS:
            kinds = ", ".join(IMPORT_KINDS)
            raise ValueError(f"choose what the file holds, one of {kinds}, not {self.kind!r}")


@dataclass
class UploadResult:
    summary: importing.ImportSummary | None = None
    error: str | None = None
    """Why nothing was imported: ``FILE:LINE: message`` for a bad line."""
    skipped: list[str] = field(default_factory=list)
    """Bad lines skipped with ``skip_invalid`` (the first SKIPPED_SHOWN)."""

    @property
    def imported(self) -> bool:
        return self.summary is not None


def upload_name(filename: str | None) -> str:
    """The name errors cite: the uploaded file's own name, without the client's folders."""
    return PurePath((filename or "").replace("\\", "/")).name or "upload.jsonl"


def _importer(options: UploadOptions) -> Callable[..., importing.ImportSummary]:
    if options.kind == "solutions":
        return partial(
            importing.import_solutions, generation=options.generation, queue=options.queue
        )
    return importing.import_prm800k if options.kind == "prm800k" else importing.import_problems


def import_upload(
    session: Session,
    filename: str | None,
    stream: BinaryIO,
    options: UploadOptions,
    progress: Progress | None = None,
) -> UploadResult:
    """Import an uploaded JSONL file in one savepoint; nothing stays of a failed upload."""
    importer = _importer(options)
    result = UploadResult()

    def report(error: ImportLineError) -> None:
        if len(result.skipped) < SKIPPED_SHOWN:
            result.skipped.append(str(error))

    try:
        with session.begin_nested():
            result.summary = importer(
                session,
                read_jsonl(upload_name(filename), stream, progress),
                skip_invalid=options.skip_invalid,
                on_invalid=report,
            )
    except ImportLineError as error:
        return UploadResult(error=str(error))
    except IntegrityError:
        return UploadResult(error=CONCURRENT_IMPORT)
    return result
