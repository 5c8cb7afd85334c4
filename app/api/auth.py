"""Bearer-token authentication for /api/v1: no cookie, no CSRF, scopes bounded by role.

The session cookie is never read here (``CookielessApi`` drops it before the session
middleware), so a browser's login cannot be borrowed by a page elsewhere: without a cookie
there is nothing for a forged request to ride on, and no CSRF token is needed.
"""

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, HTTPException
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.auth import tokens
from app.auth.tokens import TokenHolder
from app.core.db import transaction
from app.models import TokenScope

bearer = HTTPBearer(
    auto_error=False,
    description="An API token an admin made (Users page, or `steplabel tokens create`).",
)
CHALLENGE = {"WWW-Authenticate": "Bearer"}
NO_TOKEN = "Send an API token: 'Authorization: Bearer TOKEN'."
INVALID = "This API token is not valid: unknown, revoked, expired, or its user is deactivated."


def _holder(secret: str) -> TokenHolder | None:
    # A transaction of its own, committed at once: a pull that follows must not read its
    # horizon inside a transaction that wrote (the use noted on the token).
    with transaction() as session:
        return tokens.token_holder(session, secret)


async def token_holder(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> TokenHolder:
    """Dependency: who the request's token speaks for; 401 without a live token."""
    if credentials is None:
        raise HTTPException(401, NO_TOKEN, headers=CHALLENGE)
    holder = await run_in_threadpool(_holder, credentials.credentials)
    if holder is None:
        raise HTTPException(401, INVALID, headers=CHALLENGE)
    return holder


def requires(*any_of: TokenScope) -> Callable[[TokenHolder], Coroutine[Any, Any, TokenHolder]]:
    """A dependency: the holder, if the token has one of ``any_of`` and its user's role
    allows it (tokens.scope_allowed); 403 naming what is missing."""

    async def check(holder: Annotated[TokenHolder, Depends(token_holder)]) -> TokenHolder:
        names = " or ".join(repr(scope.value) for scope in any_of)
        if not any(scope in holder.scopes for scope in any_of):
            raise HTTPException(403, f"This token lacks the {names} scope.")
        permitted = any(holder.may(scope) for scope in any_of)
        if not permitted:
            raise HTTPException(
                403, f"Only an admin's token may do this; {holder.user_name} is a {holder.role}."
            )
        return holder

    return check


Holder = Annotated[TokenHolder, Depends(token_holder)]
Importer = Annotated[TokenHolder, Depends(requires(TokenScope.IMPORT))]
Exporter = Annotated[TokenHolder, Depends(requires(TokenScope.EXPORT))]
JobReader = Annotated[TokenHolder, Depends(requires(TokenScope.IMPORT, TokenScope.READ))]
