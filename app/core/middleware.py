"""What every request passes through: security headers on the way out, a body size limit
on the way in. Plain ASGI middleware: the labeling requests are hot, and Starlette's
BaseHTTPMiddleware would cost each of them a task and a copy of the response."""

import json
import logging
from collections.abc import Iterable
from contextlib import suppress

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("steplabel")

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        # No inline script anywhere (nor eval: htmx's hx-on and js: values are not used), so
        # an injected <script> or onclick= does not run.
        "script-src 'self'",
        "style-src 'self'",
        # Style attributes only (bar widths; <style> elements stay blocked): they cannot run
        # code, and img-src keeps them from loading anything from elsewhere.
        "style-src-attr 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # frame-ancestors' older equivalent, for browsers without CSP level 2.
    "X-Frame-Options": "DENY",
}


class SecurityHeaders:
    """Add SECURITY_HEADERS to every response that does not set its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


class UntrustedForwarding:
    """Forget a client address that the server took from ``X-Forwarded-For``, for an app
    that trusts no proxy (STEPLABEL_TRUSTED_PROXIES unset).

    uvicorn believes that header from 127.0.0.1 unless started with ``--no-proxy-headers``:
    under a bare ``uvicorn app.main:app`` a local client could name any address and dodge
    the per-address login limits. The address the server replaced is lost, so the client
    becomes unknown, and every such request shares the limits of one unknown address.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.warned = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        forwarded = _client_is_forwarded(scope)
        if not self.warned and _has_header(scope, b"x-forwarded-for"):
            self.warned = True
            _warn_untrusted_proxy("a proxy uvicorn believed" if forwarded else _peer(scope))
        if forwarded:
            # A copy: the server's own log keeps the address it believed.
            scope = {**scope, "client": None}
        await self.app(scope, receive, send)


def _warn_untrusted_proxy(peer: str) -> None:
    """Behind a proxy nobody trusts, every client shares one address, and so one login
    limit: one attacker's failed logins lock everyone out. Said once per process."""
    logger.warning(
        "requests carry X-Forwarded-For (from %s), but STEPLABEL_TRUSTED_PROXIES is unset: "
        "the header is not believed, so every client behind that proxy has one address and "
        "shares its login limit. Set STEPLABEL_TRUSTED_PROXIES to the proxy's address.",
        peer,
    )


def _peer(scope: Scope) -> str:
    client = scope.get("client")
    return client[0] if client else "an unknown address"


def _has_header(scope: Scope, name: bytes) -> bool:
    return any(header == name for header, _ in scope["headers"])


def _client_is_forwarded(scope: Scope) -> bool:
    """Whether the request's client is an address its ``X-Forwarded-For`` names, as it is
    after a server put that address there (a client is never its own forwarder)."""
    client = scope.get("client")
    if not client:
        return False
    named = {
        _forwarded_host(entry)
        for name, value in scope["headers"]
        if name == b"x-forwarded-for"
        for entry in value.decode("latin-1").split(",")
    }
    return client[0] in named


def _forwarded_host(entry: str) -> str:
    """The address of an ``X-Forwarded-For`` entry: ``host``, ``host:port`` or ``[v6]:port``."""
    entry = entry.strip()
    if entry.startswith("["):
        return entry[1:].partition("]")[0]
    return entry.partition(":")[0] if entry.count(":") == 1 else entry


class BodyTooLarge(Exception):
    """The request body went past its limit while the app read it."""


class BodySizeLimit:
    """Answer 413 to a request whose body is larger than its limit, without reading it all.

    Dataset uploads get ``upload_limit``, each path with its own credential: the Imports
    page's form (``session_uploads``) from a logged-in admin, the import API
    (``token_uploads``) with a bearer token; anything else ``limit``. The session is the
    signed cookie's (SessionMiddleware runs first), not yet checked against the database:
    enough to keep everyone else's uploads small, before the route refuses them.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit: int,
        upload_limit: int,
        session_uploads: Iterable[str],
        token_uploads: Iterable[str],
    ) -> None:
        self.app = app
        self.limit = limit
        self.upload_limit = upload_limit
        self.session_uploads = tuple(session_uploads)
        self.token_uploads = tuple(token_uploads)

    def limit_of(self, scope: Scope) -> int:
        if scope["method"] != "POST":
            return self.limit
        session = scope.get("session") or {}
        path = scope["path"]
        # The API checks a bearer token (and its import scope) before it reads a byte of
        # the body. The form is read whole, to disk, before its route checks who sent it:
        # a bearer header there must not buy anyone the large limit.
        if path in self.token_uploads and _has_bearer_token(scope):
            return self.upload_limit
        if path in self.session_uploads and session.get("admin") is True:
            return self.upload_limit
        return self.limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_of(scope)
        if _declared_length(scope) > limit:
            await _refuse(scope, send, limit)
            return
        await _within_limit(self.app, scope, receive, send, limit)


async def _within_limit(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send, limit: int
) -> None:
    """Run the app, counting the body as it reads it (a chunked body declares no length)."""
    received = 0
    too_large = False
    started = False

    async def counting_receive() -> Message:
        nonlocal received, too_large
        message = await receive()
        received += len(message.get("body", b""))
        if received > limit:
            too_large = True
            raise BodyTooLarge
        return message

    async def guarded_send(message: Message) -> None:
        nonlocal started
        if too_large:
            return  # whatever the app made of a body it could not read (a 400, a 500)
        started = True
        await send(message)

    with suppress(BodyTooLarge):
        await app(scope, counting_receive, guarded_send)
    if too_large and not started:
        await _refuse(scope, send, limit)


def _has_bearer_token(scope: Scope) -> bool:
    return any(
        name == b"authorization" and value[:7].lower() == b"bearer "
        for name, value in scope["headers"]
    )


TOKEN_ONLY_PREFIX = "/api/v1/"


class CookielessApi:
    """Drop the cookies of requests to the token API (/api/v1/), before the session
    middleware reads them: there a token is the only credential, so a page elsewhere
    cannot make a logged-in browser act through it (no CSRF token is needed), and the
    answers set no cookie."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(TOKEN_ONLY_PREFIX):
            headers = [(name, value) for name, value in scope["headers"] if name != b"cookie"]
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


def _declared_length(scope: Scope) -> int:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0  # the server refuses a malformed length itself
    return 0


async def _refuse(scope: Scope, send: Send, limit: int) -> None:
    message = f"The request is too large: at most {_size(limit)} is accepted."
    if scope["path"].startswith("/api/"):
        body, content_type = json.dumps({"detail": message}).encode(), b"application/json"
    else:
        body, content_type = message.encode(), b"text/plain; charset=utf-8"
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        # The client may still be sending: the connection cannot serve another request.
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _size(count: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= factor:
            return f"{count / factor:g} {unit}"
    return f"{count} bytes"
