"""A client for steplabel's JSON API (/api/v1): push files of lines in batches and wait for
their import jobs, pull labels since a cursor. ``steplabel remote push|pull`` use it; a
pipeline may import it too::

    from app.client import Client
    from app.pull_options import PullOptions
    client = Client("http://127.0.0.1:8000", token)
    client.push_file(Path("solutions.jsonl"))          # PushResult: jobs, errors
    with open("labels.jsonl", "wb") as out:
        cursor = client.pull(out, PullOptions(since=last_cursor)).next_cursor

Only httpx, pydantic (app/pull_options.py) and the standard library: no database, no
server code.
"""

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from app.pull_options import PullOptions

API = "/api/v1"
CURSOR_HEADER = "X-Steplabel-Next-Cursor"
COUNT_HEADER = "X-Steplabel-Labels"
BATCH_LINES = 5000
"""Lines per pushed batch: each batch is one import job, all or nothing."""
BATCH_BYTES = 64 << 20
"""A batch is cut before it passes this size (the server's upload limit is 2 GiB)."""
POLL_SECONDS = 0.25
POLL_RETRIES = 10
"""Polls of a job that may fail in a row (the server busy, unreachable) before giving up."""
FINISHED = ("succeeded", "failed")
UNAVAILABLE_RETRIES = 5
"""Times a request the server answered 503 (its database briefly away, app/main.py) is sent
again, each after the Retry-After the server names: a pull's 503 comes before any label, and
a push stores each solution once however often it is sent."""
RETRY_AFTER_MAX_S = 30.0

Progress = Callable[[int], None]
"""Called with how many lines (push) or labels (pull) were just done."""


class ApiError(Exception):
    """The server refused a request, or could not be reached; the message says why."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        """The HTTP status, if the server answered at all."""


@dataclass(frozen=True)
class Batch:
    first_line: int
    """The file's line number of the batch's first line (item, for a JSON array)."""
    body: bytes
    lines: int
    content_type: str


@dataclass
class PushResult:
    jobs: list[dict[str, Any]] = field(default_factory=list)
    """Every batch's job, as its last poll gave it."""
    errors: list[str] = field(default_factory=list)
    """``FILE:LINE: message`` for the failed batch's bad lines (line numbers of the file)."""

    @property
    def succeeded(self) -> bool:
        return not self.errors and all(job["status"] == "succeeded" for job in self.jobs)


@dataclass(frozen=True)
class PullResult:
    next_cursor: str
    labels: int
    """Lines written (labels in PRM800K; TRL rows, which some labels have none of)."""


class Client:
    """The API at ``url`` with a bearer ``token`` (never sent anywhere else, never logged)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.http = httpx.Client(
            base_url=url.rstrip("/") + API,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def me(self) -> dict[str, Any]:
        return self._json("GET", "/me")

    def push_batch(
        self, batch: Batch, *, name: str, kind: str, generation: int, queue: bool
    ) -> dict[str, Any]:
        """Queue one batch; its job as the server first reports it."""
        params = {"kind": kind, "generation": generation, "queue": queue, "name": name}
        return self._json(
            "POST",
            "/imports",
            params=params,
            content=batch.body,
            headers={"Content-Type": batch.content_type},
        )

    def job(self, job_id: int) -> dict[str, Any]:
        return self._json("GET", f"/imports/{job_id}")

    def wait(self, job_id: int, timeout: float | None = None) -> dict[str, Any]:
        """Poll a job until it succeeded or failed (ApiError past ``timeout`` seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while True:
            try:
                job = self.job(job_id)
                failures = 0
            except ApiError as error:
                # A server busy with the import (on SQLite it holds the one write lock)
                # may fail a poll: the job goes on, so ask again a few times.
                failures += 1
                if (error.status_code or 500) < 500 or failures > POLL_RETRIES:
                    raise
                time.sleep(POLL_SECONDS * failures)
                continue
            if job["status"] in FINISHED:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise ApiError(f"import job {job_id} is still {job['status']} after {timeout} s")
            time.sleep(POLL_SECONDS)

    def push_file(
        self,
        path: Path,
        *,
        kind: str = "solutions",
        generation: int = 0,
        queue: bool = True,
        batch_lines: int = BATCH_LINES,
        progress: Progress | None = None,
    ) -> PushResult:
        """Push a JSONL file (or a .json array) batch by batch, each waited for; stops at
        the first failed batch, whose errors name the file's own line numbers. Batches
        before it stay imported: pushing the file again adds only what is missing."""
        result = PushResult()
        for batch in batches(path, batch_lines):
            job = self.wait(
                self.push_batch(
                    batch, name=path.name, kind=kind, generation=generation, queue=queue
                )["id"]
            )
            result.jobs.append(job)
            if job["status"] != "succeeded":
                result.errors = [_file_error(path, batch, error) for error in job["errors"]]
                return result
            if progress is not None:
                progress(batch.lines)
        return result

    def pull(
        self,
        out: BinaryIO,
        options: PullOptions | None = None,
        *,
        on_total: Callable[[int], None] | None = None,
        progress: Progress | None = None,
    ) -> PullResult:
        """Write the labels ``options`` select (default: all) to ``out`` as the server
        streams them."""
        params = (options or PullOptions()).query()
        request = self.http.build_request("GET", "/labels", params=params)
        try:
            response = self._answered(request, stream=True)
            try:
                return _written(response, out, on_total, progress)
            finally:
                response.close()
        except httpx.HTTPError as error:
            raise ApiError(_unreachable(error)) from None

    def _json(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        try:
            response = self._answered(self.http.build_request(method, path, **options))
        except httpx.HTTPError as error:
            raise ApiError(_unreachable(error)) from None
        _check(response)
        answer: dict[str, Any] = response.json()
        return answer

    def _answered(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        """The server's answer to ``request``, which is sent again after the Retry-After of a
        503, at most ``UNAVAILABLE_RETRIES`` times."""
        retries_left = UNAVAILABLE_RETRIES
        while True:
            response = self.http.send(request, stream=stream)
            wait = _retry_after(response, retries_left)
            if wait is None:
                return response
            response.close()
            retries_left -= 1
            time.sleep(wait)


def _written(
    response: httpx.Response,
    out: BinaryIO,
    on_total: Callable[[int], None] | None,
    progress: Progress | None,
) -> PullResult:
    """A pull's answer written to ``out`` as it streams in."""
    _check(response)
    if on_total is not None and COUNT_HEADER in response.headers:  # none for a consensus
        on_total(int(response.headers[COUNT_HEADER]))
    lines = 0
    for chunk in response.iter_bytes():
        out.write(chunk)
        done = chunk.count(b"\n")
        lines += done
        if progress is not None and done:
            progress(done)
    return PullResult(next_cursor=response.headers[CURSOR_HEADER], labels=lines)


def _retry_after(response: httpx.Response, retries_left: int) -> float | None:
    """Seconds to wait before sending the request again, or None to take this answer: any
    but a 503, or a 503 with no retry left."""
    if response.status_code != 503 or retries_left == 0:
        return None
    try:
        return min(max(float(response.headers.get("Retry-After", "1")), 0.0), RETRY_AFTER_MAX_S)
    except ValueError:  # an HTTP date, which the app never sends
        return 1.0


def _check(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    response.read()
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, list):  # FastAPI's validation errors: where, and what is wrong
        detail = "; ".join(_validation_error(error) for error in detail)
    elif detail is not None and not isinstance(detail, str):
        detail = json.dumps(detail)
    elif detail is None and response.status_code == 404:  # an HTML page, a proxy's
        detail = f"no steplabel API at {response.request.url} (is the URL the server's root?)"
    elif detail is None:
        detail = response.reason_phrase or "no reason given"
    raise ApiError(f"the server answered {response.status_code}: {detail}", response.status_code)


def _validation_error(error: object) -> str:
    """``query kind: Input should be ...`` from one of FastAPI's validation errors."""
    if not isinstance(error, dict):
        return json.dumps(error)
    where = " ".join(str(part) for part in error.get("loc", []))
    return f"{where}: {error.get('msg', 'not valid')}"


def _unreachable(error: httpx.HTTPError) -> str:
    return f"cannot reach the server: {type(error).__name__}: {error}"


def _file_error(path: Path, batch: Batch, error: dict[str, Any]) -> str:
    if error.get("line") is None:
        return f"{path}: {error['message']}"
    return f"{path}:{batch.first_line + error['line'] - 1}: {error['message']}"


def batches(path: Path, batch_lines: int = BATCH_LINES) -> Iterator[Batch]:
    """A file's batches: JSONL lines as they are (blank ones too, so that the server's
    line numbers stay the file's), or a JSON array's items."""
    if path.suffix == ".json":
        yield from _json_batches(path, batch_lines)
        return
    with path.open("rb") as stream:
        first, lines, size, parts = 1, 0, 0, []
        for number, raw in enumerate(stream, start=1):
            parts.append(raw if raw.endswith(b"\n") else raw + b"\n")
            lines += 1
            size += len(raw)
            if lines >= batch_lines or size >= BATCH_BYTES:
                yield Batch(first, b"".join(parts), lines, "application/x-ndjson")
                first, lines, size, parts = number + 1, 0, 0, []
        if parts:
            yield Batch(first, b"".join(parts), lines, "application/x-ndjson")


def _json_batches(path: Path, batch_lines: int) -> Iterator[Batch]:
    with path.open("rb") as stream:
        items = json.load(stream)
    items = items if isinstance(items, list) else [items]
    for start in range(0, len(items), batch_lines):
        part = items[start : start + batch_lines]
        body = json.dumps(part, ensure_ascii=False).encode()
        yield Batch(start + 1, body, len(part), "application/json")


def count_lines(path: Path) -> int:
    """Lines (or a JSON array's items) in a file, for a progress bar's total."""
    if path.suffix == ".json":
        with path.open("rb") as stream:
            items = json.load(stream)
        return len(items) if isinstance(items, list) else 1
    with path.open("rb") as stream:
        return sum(1 for _ in stream)
