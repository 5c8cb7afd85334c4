"""The web application: routers, static files, templates and the error pages."""

import gc
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlencode

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
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app import browse, login, schema
from app.admin import export_page, import_jobs
from app.admin import router as admin
from app.api import router as api_v1
from app.auth import Login, Viewer, check_login, current_admin, login_of
from app.config import get_settings, session_secret
from app.db import dispose_engines, get_engine, in_database_thread
from app.inputs import json_safe
from app.labeling import router as labeling
from app.security import (
    SECURITY_HEADERS,
    BodySizeLimit,
    CookielessApi,
    SecurityHeaders,
    UntrustedForwarding,
)
from app.templating import make_templates, render, wants_fragment

logger = logging.getLogger("steplabel")
ROOT = Path(__file__).resolve().parent.parent
STATIC_DIR = ROOT / "static"
TEMPLATES_DIR = ROOT / "templates"


@asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    get_settings()  # a bad setting stops the server at start, naming the variable
    try:
        schema.check_current(get_engine())
        # Their thread died with the process that ran them; their transactions rolled back.
        import_jobs.mark_interrupted(get_engine())
    except OperationalError as error:
        # The database may come up after the app; /healthz reports it until then.
        logger.warning("database unreachable at start: %s", error.orig)
    with objects_of_startup_frozen():
        yield
    dispose_engines()


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


UPLOAD_PATHS = ("/admin/imports", "/api/v1/imports")
"""Where admins upload datasets (and tokens push batches): these get the larger limit."""

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
        upload_paths=UPLOAD_PATHS,
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
    if settings.trusted_proxies:
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxies)
    else:
        app.add_middleware(UntrustedForwarding)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(Exception, server_error)
    app.include_router(login.router)
    app.include_router(labeling.router)
    app.include_router(browse.router)
    app.include_router(browse.admin)
    app.include_router(admin.pages)
    app.include_router(admin.api)
    app.include_router(export_page.router)
    app.include_router(openapi_schema)
    app.include_router(api_v1.router)
    app.include_router(icon)
    return app


app = create_app()
