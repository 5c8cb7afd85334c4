"""Uploads imported in the background, as jobs whose state lives in ``import_jobs``.

The upload request only spools the file to a temporary file of its own (counting its
lines on the way), adds a queued job and answers; the import then runs in a daemon thread
of the web process, one job at a time (on SQLite imports take turns anyway, and on
Postgres two at once could insert the same new rows). The import and its job's final
state commit in one transaction: a job that failed kept nothing, and one that succeeded
shows it as soon as its data is there.

Progress (lines read) is written to the job's row every second, on Postgres. SQLite has
one write lock, which the import holds until it commits: every other request of the app
(which all begin with that lock) waits for it, the Imports page too, so there the job
shows its count when it ends. Upload large files while people work on Postgres.

A process that stops mid-import (killed, restarted) rolls its transaction back; the next
process to start marks such jobs failed. So one web process should serve the uploads
(``make run`` and the Docker service run one).

The spooled file has no name in the temporary folder: the system frees its space (up to
STEPLABEL_MAX_UPLOAD_BYTES) once it is closed, by the runner after its import, or by the
request when its job could not be added, and at the latest when the process ends, however
it ends.
"""

import logging
import queue
import shutil
import tempfile
import threading
from dataclasses import dataclass
from functools import partial
from typing import BinaryIO

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from app.admin.imports import (
    IMPORT_KINDS,
    SKIPPED_SHOWN,
    UploadOptions,
    UploadResult,
    import_upload,
    upload_name,
)
from app.core.db import (
    first_line,
    get_engine,
    is_database_away,
    is_sqlite,
    retried_while_away,
    transaction,
)
from app.datasets.reading import count_lines
from app.models import ImportJob, JobStatus, User, utc_now
from app.progress import Progress

logger = logging.getLogger("steplabel.imports")

PROGRESS_SECONDS = 1.0
"""How often a running job's count of lines read is passed on."""
JOBS_SHOWN = 10
INTERRUPTED = (
    "interrupted: the server stopped before this import finished, and nothing was imported. "
    "Upload the file again."
)
UNFINISHED = (JobStatus.QUEUED.value, JobStatus.RUNNING.value)


@dataclass(frozen=True)
class JobView:
    """A job as the Imports page shows it."""

    job: ImportJob
    uploaded_by: str | None

    @property
    def active(self) -> bool:
        return self.job.status in UNFINISHED

    @property
    def kind_title(self) -> str:
        return IMPORT_KINDS.get(self.job.kind, self.job.kind)

    @property
    def percent(self) -> int:
        total = self.job.lines_total
        return min(100, self.job.lines_done * 100 // total) if total else 0

    @property
    def skipped_cut(self) -> bool:
        """Only the first SKIPPED_SHOWN of the skipped lines were kept."""
        return len(self.job.skipped or []) >= SKIPPED_SHOWN

    @property
    def seconds(self) -> float | None:
        """Seconds the import ran (so far, while it runs)."""
        if self.job.started_at is None:
            return None
        return ((self.job.finished_at or utc_now()) - self.job.started_at).total_seconds()

    @property
    def lines_per_second(self) -> float | None:
        seconds = self.seconds
        return self.job.lines_done / seconds if seconds else None


class JobRunner:
    """A daemon thread that runs this process's queued jobs in order.

    A daemon, so that stopping the server never waits for an import: the import's
    transaction is rolled back, and the next start marks the job interrupted.
    """

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[str, int, BinaryIO]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self, database_url: str, job_id: int, upload: BinaryIO) -> None:
        """Queue a job whose row is committed; its spooled ``upload`` is closed once it ran."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run_forever, name="import-jobs", daemon=True
                )
                self._thread.start()
        self.jobs.put((database_url, job_id, upload))

    def _run_forever(self) -> None:
        while True:
            database_url, job_id, upload = self.jobs.get()
            try:
                with upload:
                    run_job(get_engine(database_url), job_id, upload)
            except Exception:
                # Recording failed, and not for an outage (run_job waits those out): the
                # job stays unfinished until the next start marks it; the thread goes on.
                logger.exception("import job %s could not be recorded", job_id)


RUNNER = JobRunner()

FILE_NAME_MAX_CHARS: int = ImportJob.filename.type.length
"""The longest file name a job keeps."""


def job_file_name(filename: str) -> str:
    """The uploaded file's name as its job keeps it; ValueError if the job cannot keep it."""
    name = upload_name(filename)
    if "\x00" in name:
        # Postgres cannot store it (a multipart name has no surrogates).
        raise ValueError("the file's name must not contain the NUL character")
    if len(name) > FILE_NAME_MAX_CHARS:
        raise ValueError(
            f"the file's name has {len(name):,} characters, more than the "
            f"{FILE_NAME_MAX_CHARS} a job keeps: rename it"
        )
    return name


def spool(source: BinaryIO) -> tuple[BinaryIO, int]:
    """Copy an upload to a temporary file that outlives the request; (the file, its lines).

    The file has no name: closed, or lost with its process, it leaves nothing behind."""
    # Not a with block: the file outlives this function (the job runner closes it).
    copy = tempfile.TemporaryFile(prefix="steplabel-upload-")  # noqa: SIM115
    try:
        shutil.copyfileobj(source, copy, 1 << 20)
        copy.seek(0)
        lines = count_lines(copy)
        copy.seek(0)
    except BaseException:
        copy.close()
        raise
    return copy, lines


def queue_upload(
    session: Session, source: BinaryIO, name: str, options: UploadOptions, admin_id: int
) -> tuple[ImportJob, BinaryIO]:
    """Spool an upload and add its queued job (flushed, so that it has its id); (the job,
    the spooled file to hand to RUNNER once the job's row is committed)."""
    upload, lines = spool(source)
    try:
        return add_job(session, name, options, lines, admin_id), upload
    except BaseException:
        upload.close()
        raise


def add_job(
    session: Session, name: str, options: UploadOptions, lines: int, admin_id: int
) -> ImportJob:
    """A queued job for an upload named ``name`` (a ``job_file_name``), flushed."""
    job = ImportJob(
        kind=options.kind,
        filename=name,
        skip_invalid=options.skip_invalid,
        generation=options.generation,
        queue=options.queue,
        lines_total=lines,
        created_by_id=admin_id,
    )
    session.add(job)
    session.flush()
    return job


def recent_jobs(session: Session, limit: int = JOBS_SHOWN) -> list[JobView]:
    """The newest jobs and who uploaded them."""
    rows = session.execute(
        select(ImportJob, User.name)
        .outerjoin(User, User.id == ImportJob.created_by_id)
        .order_by(ImportJob.id.desc())
        .limit(limit)
    ).all()
    return [JobView(job, name) for job, name in rows]


def mark_interrupted(engine: Engine) -> None:
    """At process start: jobs left queued or running lost their process; they failed."""
    with transaction(engine) as session:
        session.execute(
            update(ImportJob)
            .where(ImportJob.status.in_(UNFINISHED))
            .values(status=JobStatus.FAILED.value, error=INTERRUPTED, finished_at=utc_now())
        )


def run_job(engine: Engine, job_id: int, upload: BinaryIO) -> None:
    """Import the job's spooled file; the data and the job's outcome commit together.

    While the database is unreachable (a restart), the job's start and its failure are
    recorded once it is back: a job is never left queued or running by a live process."""
    if not retried_while_away(partial(_start, engine, job_id), f"import job {job_id}: starting"):
        return  # marked interrupted while it waited
    # On SQLite the import holds the one write lock, which a progress write would wait for.
    sqlite = is_sqlite(engine.url.drivername)
    show = _count_only if sqlite else partial(_note_progress, engine, job_id)
    progress = Progress(show, PROGRESS_SECONDS)
    try:
        with transaction(engine) as session:
            job = session.get_one(ImportJob, job_id)
            result = import_upload(session, job.filename, upload, _options(job), progress)
            _record_outcome(job, result, progress.done)
    except Exception as error:
        logger.exception("import job %s failed", job_id)
        cause = (
            f"the database failed: {first_line(error)}"
            if is_database_away(error)
            else f"{type(error).__name__}: {error}"
        )
        message = f"the import stopped: {cause}; nothing was imported"
        failed = partial(_record_failure, engine, job_id, message, progress.done)
        retried_while_away(failed, f"import job {job_id}: recording its failure")


def _start(engine: Engine, job_id: int) -> bool:
    """Mark the job running; False if it is no longer queued."""
    with transaction(engine) as session:
        job = session.get(ImportJob, job_id)
        if job is None or job.status != JobStatus.QUEUED.value:
            return False
        job.status, job.started_at = JobStatus.RUNNING.value, utc_now()
        return True


def _record_failure(engine: Engine, job_id: int, message: str, lines_done: int) -> None:
    with transaction(engine) as session:
        job = session.get_one(ImportJob, job_id)
        _record_outcome(job, UploadResult(error=message), lines_done)


def _options(job: ImportJob) -> UploadOptions:
    return UploadOptions(job.kind, job.skip_invalid, job.generation, job.queue)


def _count_only(_done: int) -> None:
    """Progress that only counts, for the job's final row."""


def _note_progress(engine: Engine, job_id: int, done: int) -> None:
    # Its own short transaction: the import's one is seen by nobody until it commits.
    with engine.begin() as connection:
        connection.execute(update(ImportJob).where(ImportJob.id == job_id).values(lines_done=done))


def _record_outcome(job: ImportJob, result: UploadResult, lines_done: int) -> None:
    job.finished_at = utc_now()
    job.lines_done = lines_done
    if result.summary is None:
        job.status, job.error = JobStatus.FAILED.value, result.error
        return
    job.status, job.summary = JobStatus.SUCCEEDED.value, result.summary.describe()
    job.skipped = result.skipped or None
