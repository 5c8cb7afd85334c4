"""What the app takes from a client, checked where it comes in: numbers that fit the
database's INTEGER columns, text that a database can store, JSON without NaN.

Anything else would get as far as the database and fail there, as a 500: Postgres refuses
an INTEGER past 2**31 - 1 (SQLite one past 2**63 - 1) and text holding NUL, no driver can
encode a lone surrogate, and a 422 that echoes NaN back is not JSON either.
"""

import json
import math
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, NoReturn

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from pydantic import Field

from app.models import SCREENING_GENERATION
from app.storable import Text as Text  # its home is light: the client checks with it too

INTEGER_MAX = 2**31 - 1
"""The largest value of an INTEGER column on Postgres: ids, generations, counts."""

DbId = Annotated[int, Field(ge=1, le=INTEGER_MAX)]
"""A row's id, in a path, a query or a body."""
GenerationNumber = Annotated[int, Field(ge=SCREENING_GENERATION, le=INTEGER_MAX)]
"""A generation of solutions: -1 (the screening set), 0 and up."""
PageNumber = Annotated[int, Field(ge=1, le=INTEGER_MAX)]


def json_safe(value: Any) -> Any:
    """``value`` (decoded JSON, or an echo of it) with what JSON cannot carry spelled out:
    NaN and infinities as text, lone surrogates as backslash escapes."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {json_safe(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def _refuse_constant(name: str) -> NoReturn:
    raise HTTPException(422, f"The body is not valid JSON: {name} is not a JSON number.")


class StrictJsonRequest(Request):
    """A request whose JSON body may not hold NaN or Infinity: Python's json module reads
    them, JSON has no such numbers, and nothing that stores a body expects them."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = json.loads(await self.body(), parse_constant=_refuse_constant)
        return self._json


class StrictJsonRoute(APIRoute):
    """A route that reads its JSON body with StrictJsonRequest (``APIRouter(route_class=)``)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_json_handler(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict_json_handler
