"""The web application: routers, static files, templates and the error pages."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException

from app import browse, schema
from app.config import get_settings
from app.db import dispose_engines, get_engine
from app.templating import render, wants_fragment

logger = logging.getLogger("steplabel")
ROOT = Path(__file__).resolve().parent.parent
STATIC_DIR = ROOT / "static"
TEMPLATES_DIR = ROOT / "templates"


@asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    get_settings()  # a bad setting stops the server at start, naming the variable
    try:
        schema.check_current(get_engine())
    except OperationalError as error:
        # The database may come up after the app; /healthz reports it until then.
        logger.warning("database unreachable at start: %s", error.orig)
    yield
    dispose_engines()


async def http_error(request: Request, error: Exception) -> Response:
    """Answer /api with JSON, an htmx swap with a small fragment and a page with a page."""
    assert isinstance(error, HTTPException)
    if request.url.path.startswith("/api/"):
        return JSONResponse(
            {"detail": error.detail}, status_code=error.status_code, headers=error.headers
        )
    context = {
        "status_code": error.status_code,
        "title": HTTPStatus(error.status_code).phrase,
        "message": error.detail,
    }
    block = "error" if wants_fragment(request) else None
    response = render(request, "error.html", context, block=block, status_code=error.status_code)
    response.headers.update(error.headers or {})
    return response


def create_app() -> FastAPI:
    app = FastAPI(title="steplabel", lifespan=lifespan)
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    app.state.templates = Jinja2Templates(env=environment)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_exception_handler(HTTPException, http_error)
    app.include_router(browse.router)
    return app


app = create_app()
