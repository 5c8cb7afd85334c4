"""The Throughput screen: labels and labelers over a window of time."""

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from app.admin import dashboard, throughput
from app.core.db import DbSession

pages = APIRouter()
api = APIRouter()


def existing_window(window: str = throughput.DEFAULT_WINDOW) -> throughput.Window:
    """Dependency: the ``window`` query parameter, or 404 for one the page does not offer."""
    if window not in throughput.WINDOWS:
        choices = ", ".join(throughput.WINDOWS)
        raise HTTPException(404, f"There is no window {window!r}: choose one of {choices}.")
    return throughput.WINDOWS[window]


Window = Annotated[throughput.Window, Depends(existing_window)]


@pages.get("/throughput", response_class=HTMLResponse)
def throughput_page(request: Request, session: DbSession, window: Window) -> HTMLResponse:
    context = {
        "section": "throughput",
        "windows": throughput.WINDOWS.values(),
        "throughput": throughput.throughput(session, window),
    }
    return dashboard.live_page(request, "admin/throughput.html", context, "figures")


@api.get("/throughput")
def throughput_api(session: DbSession, window: Window) -> throughput.Throughput:
    return throughput.throughput(session, window)
