"""CSRF: the session's token, and the check every state-changing request passes."""

import hmac
import secrets

from fastapi import HTTPException, Request

CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def csrf_token(request: Request) -> str:
    """This session's CSRF token, made on first use (the login form needs one too)."""
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


async def check_csrf(request: Request) -> None:
    """Dependency: a state-changing request must carry the session's CSRF token."""
    if request.method not in UNSAFE_METHODS:
        return
    expected = request.session.get("csrf")
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    if not isinstance(expected, str) or not sent or not _same_token(expected, sent):
        raise HTTPException(403, "The form expired or came from elsewhere: reload the page.")


def _same_token(expected: str, sent: str) -> bool:
    # As bytes: compare_digest refuses a str that is not ASCII (a TypeError, a 500), and a
    # client may send any text, a header's bytes read as Latin-1 included.
    return hmac.compare_digest(expected.encode(), sent.encode("utf-8", "surrogatepass"))
