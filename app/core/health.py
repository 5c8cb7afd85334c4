"""Health probes, open to anyone (load balancers, supervisors): /healthz and /readyz."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.core.db import RETRY_AFTER_S, get_engine

router = APIRouter()


@router.get("/healthz")
def healthz() -> JSONResponse:
    """Liveness: the process answers. It asks the database nothing, so that a supervisor
    does not restart every app process while the database restarts (/readyz says that)."""
    return JSONResponse({"status": "ok"})


readiness = APIRouter()
"""/readyz, open to anyone as /healthz is."""


@readiness.get("/readyz")
def readyz() -> JSONResponse:
    """Readiness: whether the database answers ``SELECT 1``; 503 with Retry-After while it
    does not, for a load balancer to send requests elsewhere meanwhile."""
    try:
        with get_engine().connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        return JSONResponse(
            {"status": "unavailable", "database": type(error).__name__},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    return JSONResponse({"status": "ready", "database": "ok"})
