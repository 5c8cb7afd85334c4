"""The Imports screen: uploading JSONL files, and the import jobs they queue."""

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request, UploadFile
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session
from starlette.background import BackgroundTask

from app import audit
from app.admin import dashboard, import_jobs, imports
from app.auth.sessions import CurrentAdmin
from app.core.config import get_settings
from app.core.db import DbSession
from app.datasets.examples import EXAMPLE_LINES
from app.models import SCREENING_GENERATION

pages = APIRouter()


@pages.get("/imports", response_class=HTMLResponse)
def imports_page(request: Request, session: DbSession) -> HTMLResponse:
    return dashboard.live_page(request, "admin/imports.html", _imports_context(session), "jobs")


def _imports_context(session: Session) -> dict[str, Any]:
    return {
        "section": "imports",
        "kinds": imports.IMPORT_KINDS,
        "examples": EXAMPLE_LINES,
        "jobs": import_jobs.recent_jobs(session),
    }


@pages.post("/imports", response_class=HTMLResponse)
def upload(
    request: Request,
    session: DbSession,
    admin: CurrentAdmin,
    file: UploadFile | None = None,
    kind: Annotated[str, Form()] = "",
    skip_invalid: Annotated[bool, Form()] = False,
    generation: Annotated[str, Form()] = "0",
    no_queue: Annotated[bool, Form()] = False,
) -> HTMLResponse:
    """Spool the file and queue a job for it; the import runs after the response."""
    try:
        if file is None or not file.filename:
            raise ValueError("choose a JSONL file to upload")
        name = import_jobs.job_file_name(file.filename)
        options = imports.UploadOptions(
            kind=kind,
            skip_invalid=skip_invalid,
            generation=dashboard.whole_number(
                generation, "generation", minimum=SCREENING_GENERATION
            ),
            queue=not no_queue,
        )
    except ValueError as error:
        return _imports_answer(request, session, {"error": str(error)})
    job, upload = import_jobs.queue_upload(session, file.file, name, options, admin.id)
    after = {
        "job": job.id,
        "kind": options.kind,
        "generation": options.generation,
        "queue": options.queue,
        "skip_invalid": options.skip_invalid,
    }
    audit.record(session, admin, "import.queue", f"file {name}", None, after)
    response = _imports_answer(request, session, {"submitted": job})
    # A background task runs once the response is out, after the request's transaction
    # committed the job's row; the job runs in the import thread, not in this request.
    # Should the response fail, the spooled file is closed with it (import_jobs.spool).
    response.background = BackgroundTask(
        import_jobs.RUNNER.start, get_settings().database_url, job.id, upload
    )
    return response


def _imports_answer(request: Request, session: Session, outcome: dict[str, Any]) -> HTMLResponse:
    return dashboard.form_answer(
        request,
        "admin/imports.html",
        lambda: _imports_context(session),
        {"jobs": import_jobs.recent_jobs(session), **outcome},
        failed="error" in outcome,
        block="uploads",
    )
