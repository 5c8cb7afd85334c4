"""Logging in and out, and the front door that sends each user to their home page."""

import math
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth.sessions import LoginThrottled, authenticate, current_user_or_none, log_in, log_out
from app.core.csrf import check_csrf
from app.core.db import DbSession
from app.inputs import Text
from app.models import Role, User, utc_now
from app.templating import render

router = APIRouter(dependencies=[Depends(check_csrf)])
MaybeUser = Annotated[User | None, Depends(current_user_or_none)]


def home_of(user: User) -> str:
    return "/admin" if user.role == Role.ADMIN.value else "/label/next"


def _safe_next(target: str | None) -> str | None:
    """Only local paths: a login link must not bounce the user to another site."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return None
    parts = urlsplit(target)
    return None if parts.scheme or parts.netloc else target


@router.get("/", response_model=None)
def front_door(user: MaybeUser) -> Response:
    return RedirectResponse(home_of(user) if user else "/login", status_code=303)


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, user: MaybeUser, next: str | None = None) -> Response:
    if user is not None:
        return RedirectResponse(_safe_next(next) or home_of(user), status_code=303)
    return render(request, "login.html", {"next": _safe_next(next) or "", "error": None})


@router.post("/login", response_model=None)
def login(
    request: Request,
    session: DbSession,
    name: Annotated[Text, Form(max_length=120)],
    password: Annotated[Text, Form(max_length=1000)],
    next: Annotated[str, Form()] = "",
) -> Response:
    # The proxy middleware (app/main.py) has put a trusted proxy's client here.
    address = request.client.host if request.client else "unknown"
    context = {"next": _safe_next(next) or "", "name": name}
    try:
        user = authenticate(session, name.strip(), password, address[:64])
    except LoginThrottled as throttled:
        wait = max(1, math.ceil((throttled.until - utc_now()).total_seconds()))
        error = (
            f"Too many failed attempts: try again in {_duration(wait)}, "
            "or ask an admin to reset your password."
        )
        response = render(request, "login.html", context | {"error": error}, status_code=429)
        response.headers["Retry-After"] = str(wait)
        return response
    if user is None:
        error = "That name and password do not match an active account."
        return render(request, "login.html", context | {"error": error}, status_code=401)
    log_in(request, user)
    return RedirectResponse(_safe_next(next) or home_of(user), status_code=303)


def _duration(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} seconds"
    return f"{math.ceil(seconds / 60)} minutes"


@router.post("/logout")
def logout(request: Request, session: DbSession) -> RedirectResponse:
    log_out(request, session)
    return RedirectResponse("/login", status_code=303)
