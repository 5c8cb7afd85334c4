"""What the /api/v1 routes answer, as Pydantic models (they are the OpenAPI schema's)."""

from datetime import datetime

from pydantic import BaseModel

from app.api.push import line_error
from app.auth.tokens import TokenHolder
from app.models import ImportJob


class Me(BaseModel):
    """The token's user and what the token may do."""

    name: str
    role: str
    scopes: list[str]

    @classmethod
    def of(cls, holder: TokenHolder) -> "Me":
        scopes = sorted(scope.value for scope in holder.scopes if holder.may(scope))
        return cls(name=holder.user_name, role=holder.role, scopes=scopes)


class LineError(BaseModel):
    """A bad line of a batch: its number (from 1; JSON arrays: the item's) and what is wrong."""

    line: int | None
    message: str


class ImportJobOut(BaseModel):
    """A pushed batch's import job. ``status``: queued, running, succeeded or failed; a
    failed job imported nothing, and ``errors`` says why."""

    id: int
    status: str
    kind: str
    filename: str
    lines_total: int
    lines_done: int
    summary: str | None
    errors: list[LineError]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    url: str

    @classmethod
    def of(cls, job: ImportJob) -> "ImportJobOut":
        texts = ([job.error] if job.error else []) + list(job.skipped or [])
        errors = [_line_error(text, job.filename) for text in texts]
        return cls(
            id=job.id,
            status=job.status,
            kind=job.kind,
            filename=job.filename,
            lines_total=job.lines_total,
            lines_done=job.lines_done,
            summary=job.summary,
            errors=errors,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            url=f"/api/v1/imports/{job.id}",
        )


def _line_error(text: str, filename: str) -> LineError:
    line, message = line_error(text, filename)
    return LineError(line=line, message=message)
