"""The web application: routers, static files, templates and the error pages."""

import gc
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlencode

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from starlette.exceptions import HTTPException
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.admin import import_jobs
from app.admin import router as admin
from app.api import router as api_v1
from app.auth import router as login
from app.auth.sessions import Login, Viewer, check_login, current_admin, login_of
from app.core import health, schema
from app.core.config import SettingsError, get_settings, session_secret
from app.core.db import (
    DATABASE_AWAY,
    RETRY_AFTER_S,
    dispose_engines,
    first_line,
    get_engine,
    in_database_thread,
    is_database_away,
)
from app.core.middleware import (
    SECURITY_HEADERS,
    BodySizeLimit,
    CookielessApi,
    SecurityHeaders,
    UntrustedForwarding,
)
from app.inputs import json_safe
from app.labeling import router as labeling
from app.labeling import service as labeling_service
from app.templating import make_templates, render, wants_fragment

logger = logging.getLogger("steplabel")
ROOT = Path(__file__).resolve().parent.parent
STATIC_DIR = ROOT / "static"
TEMPLATES_DIR = ROOT / "templates"


@asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    settings = get_settings()  # a bad setting stops the server at start, naming the variable
    try:
        # Their thread died with the process that ran them; their transactions rolled back.
        import_jobs.mark_interrupted(get_engine())
        labeling_service.follow_configured_overlap(get_engine(), settings)
    except OperationalError as error:
        # The database may come up after the app; /readyz reports it until then.
        logger.warning("database unreachable at start: %s", error.orig)
    with objects_of_startup_frozen():
        yield
    dispose_engines()


class SchemaCheck:
    """Refuses the server's start on a database whose schema is not the code's, with one
    line that says to run `steplabel migrate` (uvicorn logs it, then "Application startup
    failed. Exiting."): a traceback would bury it. Outside the app's own lifespan, which
    Starlette would report with a traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        first = await receive()
        if first["type"] == "lifespan.startup":
            try:
                await to_thread.run_sync(_check_schema)
            except schema.SchemaOutOfDate as error:
                await send({"type": "lifespan.startup.failed", "message": str(error)})
                raise  # for an app run in-process (Starlette's TestClient), which logs nothing
        replayed = False

        async def receive_again() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return first

        await self.app(scope, receive_again, send)


def _check_schema() -> None:
    try:
        schema.check_current(get_engine())
    except OperationalError as error:
        # The database may come up after the app; /readyz reports it until then.
        logger.warning("database unreachable at start: %s", error.orig)


@contextmanager
def objects_of_startup_frozen() -> Iterator[None]:
    """Keep the garbage collector's full passes off the objects every worker loads once.

    A full pass visits every tracked object; a worker's modules, routes and templates are
    about 150,000 of them, which took 100-120 ms of CPU a pass on the 2-core benchmark
    machine, some ten times a minute under load, every request in flight waiting on it.
    Frozen, they are skipped (a pass then takes a few ms); they live as long as the process
    anyway. (No collection first: freezing is instant, and what little garbage the start
    left stays with it.) Unfrozen on the way out, so that tests starting many apps in one
    process keep nothing."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def http_error(request: Request, error: Exception) -> Response:
    """Answer /api with JSON, an htmx swap with a small fragment and a page with a page."""
    assert isinstance(error, HTTPException)
    if error.status_code == 401 and not request.url.path.startswith("/api/"):
        return _to_login(request)
    if request.url.path.startswith("/api/"):
        return JSONResponse(
            {"detail": error.detail}, status_code=error.status_code, headers=error.headers
        )
    title = HTTPStatus(error.status_code).phrase
    response = await _error_page(request, error.status_code, title, error.detail)
    response.headers.update(error.headers or {})
    return response


async def invalid_request(request: Request, error: Exception) -> Response:
    """A request whose types are refused: a page for a browser (or a fragment for htmx)
    that names what is wrong, else FastAPI's JSON 422 with the input it echoes made
    JSON-safe (a NaN or a lone surrogate there would fail the response, a 500 in place of
    the 422)."""
    assert isinstance(error, RequestValidationError)
    if _from_a_page(request):
        return await _error_page(request, 422, "Invalid request", refusals(error))
    return JSONResponse({"detail": json_safe(jsonable_encoder(error.errors()))}, status_code=422)


async def _error_page(request: Request, status_code: int, title: str, message: str) -> Response:
    """The error page, or only its block for an htmx swap (which keeps the page's header)."""
    context = {"status_code": status_code, "title": title, "message": message}
    block = "error" if wants_fragment(request) else None
    if block is None:
        await _find_viewer(request)
    return render(request, "error.html", context, block=block, status_code=status_code)


async def _find_viewer(request: Request) -> None:
    """Who is logged in, for an error page's header as for every page's: a path that matched
    no route, or was refused before its route ran, never looked."""
    if getattr(request.state, "viewer", None) is not None or "session" not in request.scope:
        return
    try:
        login = await login_of(request)
    except HTTPException:
        return  # nobody is logged in
    request.state.viewer = await in_database_thread(_active_viewer, login)


def _active_viewer(login: Login) -> Viewer | None:
    try:
        with get_engine().connect() as connection:
            return check_login(connection, login)
    except (HTTPException, SQLAlchemyError):
        return None  # the login ended, or the database is down: a page without a name


def _from_a_page(request: Request) -> bool:
    """A browser's navigation or form (it asks for HTML) or an htmx swap, not an API call."""
    if request.url.path.startswith("/api/"):
        return False
    return wants_fragment(request) or "text/html" in request.headers.get("accept", "")


def refusals(error: RequestValidationError, shown: int = 3) -> str:
    """What is wrong with the request, field by field; never the input itself, which may be
    long (a 5,000-character name) or anything at all."""
    parts = []
    for problem in error.errors()[:shown]:
        where = [str(part) for part in problem.get("loc", ()) if part not in LOCATIONS]
        parts.append(f"{'.'.join(where) or 'the request'}: {problem.get('msg', 'invalid')}")
    more = len(error.errors()) - shown
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "") + "."


LOCATIONS = ("query", "path", "body", "header", "cookie")
"""Where FastAPI says a refused value came from: not part of the field's name."""


DATABASE_AWAY_MESSAGE = (
    f"The database is briefly unavailable. Nothing was lost: try again in {RETRY_AFTER_S} s."
)


async def database_away(request: Request, error: Exception) -> Response:
    """A request the database could not serve (a restart, a failover, no connection to be
    had): 503 with Retry-After, as JSON for /api, a fragment for htmx and a page for a
    browser, never a 500. Its transaction rolled back, so it can be sent again as it was.
    Any other error of these types (a missing table, say) is the crash it is."""
    if not is_database_away(error):
        logger.error("%s %s", request.method, request.url.path, exc_info=error)
        return await server_error(request, error)
    logger.warning(
        "%s %s: database unreachable: %s", request.method, request.url.path, first_line(error)
    )
    headers = {"Retry-After": str(RETRY_AFTER_S)}
    if request.url.path.startswith("/api/") or not _from_a_page(request):
        return JSONResponse({"detail": DATABASE_AWAY_MESSAGE}, status_code=503, headers=headers)
    block = "error" if wants_fragment(request) else None
    context = {
        "status_code": 503,
        "title": "Database unavailable",
        "message": DATABASE_AWAY_MESSAGE,
    }
    response = render(request, "error.html", context, block=block, status_code=503)
    response.headers.update(headers)
    return response


async def server_error(_request: Request, _error: Exception) -> Response:
    """A crash's plain 500, with the security headers: Starlette answers it from outside
    every middleware, SecurityHeaders included."""
    return PlainTextResponse("Internal Server Error", status_code=500, headers=SECURITY_HEADERS)


def _to_login(request: Request) -> Response:
    """Pages send a logged-out user to the login page, and back here afterwards."""
    target = "/login?" + urlencode({"next": request.url.path})
    if wants_fragment(request):
        # htmx would swap the login page into the task area; have it navigate instead.
        return Response(status_code=200, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


SESSION_UPLOADS = ("/admin/imports",)
"""Where admins upload datasets in the browser: the larger limit, for an admin's session."""
TOKEN_UPLOADS = ("/api/v1/imports",)
"""Where tokens push batches: the larger limit, for a request with a bearer token."""

openapi_schema = APIRouter(dependencies=[Depends(current_admin)])


@openapi_schema.get("/openapi.json", include_in_schema=False)
def openapi_json(request: Request) -> JSONResponse:
    """The API's schema, for admins' tools."""
    return JSONResponse(request.app.openapi())


icon = APIRouter()


@icon.get("/favicon.ico", include_in_schema=False)
def favicon() -> FileResponse:
    """The site's icon, where browsers and tools ask for it whatever the page links."""
    return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")


def create_app() -> FastAPI:
    settings = get_settings()
    # No /docs or /redoc (they load their scripts from a CDN); the schema is for admins.
    app = FastAPI(
        title="steplabel", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.templates = make_templates(TEMPLATES_DIR)
    # The middleware added last runs first: proxy headers (or forgetting an address the
    # server believed from them), security headers, dropping the token API's cookies, the
    # session, then the body limit (which reads the session).
    app.add_middleware(
        BodySizeLimit,
        limit=settings.max_body_bytes,
        upload_limit=settings.max_upload_bytes,
        session_uploads=SESSION_UPLOADS,
        token_uploads=TOKEN_UPLOADS,
    )
    app.add_middleware(
        SessionMiddleware,
        secret_key=session_secret(settings),
        session_cookie="steplabel_session",
        max_age=14 * 24 * 3600,
        same_site="lax",
        https_only=settings.secure_cookies,
    )
    app.add_middleware(CookielessApi)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(SchemaCheck)
    if settings.trusted_proxies:
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxies)
    else:
        app.add_middleware(UntrustedForwarding)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    for away in DATABASE_AWAY:
        app.add_exception_handler(away, database_away)
    app.add_exception_handler(Exception, server_error)
    app.include_router(login.router)
    app.include_router(labeling.router)
    app.include_router(health.router)
    app.include_router(admin.pages)
    app.include_router(admin.api)
    app.include_router(openapi_schema)
    app.include_router(api_v1.router)
    app.include_router(icon)
    app.include_router(health.readiness)
    return app


def _app_or_exit() -> FastAPI:
    """The app ``uvicorn app.main:app`` serves. A bad setting ends the server with one line
    naming the variable and exit status 2, as the command line and the worker say it: the
    traceback of an import would bury it."""
    try:
        return create_app()
    except SettingsError as error:
        print(error, file=sys.stderr)
        raise SystemExit(2) from None


app = _app_or_exit()
