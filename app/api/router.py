"""The /api/v1 routes: thin, the work in tokens, push and pull. Bearer tokens only."""

import tempfile
from typing import Annotated, BinaryIO, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from app.admin import import_jobs
from app.admin.imports import UploadOptions
from app.api import push
from app.api.auth import Exporter, Holder, Importer, JobReader
from app.api.schemas import ImportJobOut, Me
from app.auth.tokens import TokenHolder
from app.core.config import get_settings
from app.core.db import DbSession, transaction
from app.datasets import pull
from app.inputs import DbId, GenerationNumber
from app.models import ImportJob
from app.pull_options import PullOptions

router = APIRouter(prefix="/api/v1", tags=["api v1"])

BATCH_BODY = {
    "requestBody": {
        "required": True,
        "description": "JSONL (one object a line), or a JSON array of the lines' objects.",
        "content": {
            "application/x-ndjson": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
        },
    }
}


@router.get("/me")
def me(holder: Holder) -> Me:
    """The token's user and the scopes it may use."""
    return Me.of(holder)


@router.post("/imports", status_code=202, openapi_extra=BATCH_BODY)
async def push_batch(
    request: Request,
    holder: Importer,
    kind: Literal["solutions", "problems", "prm800k"] = "solutions",
    generation: GenerationNumber = 0,
    queue: bool = True,
    name: Annotated[str, Query(max_length=255)] = "batch.jsonl",
) -> ImportJobOut:
    """Queue a batch for import, all or nothing; poll the job's ``url`` for its outcome.

    The lines are what ``steplabel import KIND`` reads. Rows already stored (by content)
    are counted as present and added again nowhere, so a batch sent twice adds nothing.
    """
    body = await _spooled_body(request)
    options = UploadOptions(kind, skip_invalid=False, generation=generation, queue=queue)
    content_type = request.headers.get("content-type", "")
    return await run_in_threadpool(_queue, body, content_type, name, options, holder)


async def _spooled_body(request: Request) -> BinaryIO:
    body = tempfile.TemporaryFile(prefix="steplabel-push-")  # noqa: SIM115 (handed on)
    try:
        async for chunk in request.stream():
            body.write(chunk)
    except BaseException:
        body.close()
        raise
    body.seek(0)
    return body


def _queue(
    body: BinaryIO, content_type: str, name: str, options: UploadOptions, holder: TokenHolder
) -> ImportJobOut:
    try:
        source = push.as_jsonl(body, content_type)  # a JSON body is converted, and closed
        with source, transaction() as session:
            job, upload = push.queue_batch(session, source, name, options, holder)
            answer = ImportJobOut.of(job)
    except push.PushError as error:
        body.close()
        raise HTTPException(400, str(error)) from None
    # Once the job's row is committed: the runner's thread must find it.
    import_jobs.RUNNER.start(get_settings().database_url, job.id, upload)
    return answer


@router.get("/imports/{job_id}")
def import_job(job_id: DbId, _holder: JobReader) -> ImportJobOut:
    """A pushed batch's job: queued, running, succeeded (its summary) or failed (errors)."""
    with transaction() as session:
        job = session.get(ImportJob, job_id)
        if job is None:
            raise HTTPException(404, f"There is no import job {job_id}.")
        return ImportJobOut.of(job)


@router.get(
    "/labels",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
def pull_labels(
    _holder: Exporter, session: DbSession, options: Annotated[PullOptions, Query()]
) -> StreamingResponse:
    """Labels as PRM800K JSONL (byte for byte as ``steplabel export``) or TRL rows, in id
    order. ``since``: the cursor of the last pull; the response's X-Steplabel-Next-Cursor
    header is the next one. A pull never skips or repeats a label, labels being written
    meanwhile included. ``external_id``, where a solution has one, is a last, extra key.
    """
    try:
        planned = pull.plan_pull(session, options)
    except pull.PullError as error:
        raise HTTPException(400, str(error)) from None
    return StreamingResponse(
        planned.lines(), media_type="application/x-ndjson", headers=planned.headers()
    )


@router.get("/openapi.json", include_in_schema=False)
def openapi_schema(request: Request, _holder: Holder) -> JSONResponse:
    """The API's schema, for any valid token's holder."""
    return JSONResponse(request.app.openapi())
