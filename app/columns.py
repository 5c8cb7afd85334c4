"""Input constraints taken from the columns values are stored in.

Postgres refuses an integer past its column's range, a string longer than its ``VARCHAR``,
and text holding NUL; SQLite stores all three. Validating input against the column makes
both databases accept the same lines, and a bad value an error that names its field.
"""

from typing import Annotated, Any

from pydantic import AfterValidator, Field
from pydantic.fields import FieldInfo
from sqlalchemy import BigInteger, Column, Integer, SmallInteger, String

_INTEGER_BITS = ((SmallInteger, 16), (BigInteger, 64), (Integer, 32))


def integer_bounds(column: Column[Any]) -> tuple[int, int]:
    """The least and the greatest integer ``column`` stores."""
    for integer_type, bits in _INTEGER_BITS:
        if isinstance(column.type, integer_type):
            return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    raise TypeError(f"{column} is not an integer column")


def string_length(column: Column[Any]) -> int:
    """The most characters ``column`` stores."""
    column_type = column.type
    if not isinstance(column_type, String) or column_type.length is None:
        raise TypeError(f"{column} has no length")
    return column_type.length


def fits(column: Column[Any]) -> FieldInfo:
    """Constraints that keep a value within what ``column`` stores: a length, or a range."""
    if isinstance(column.type, String):
        info: FieldInfo = Field(max_length=string_length(column))
        return info
    low, high = integer_bounds(column)
    info = Field(ge=low, le=high)
    return info


def _positive_zero(value: float) -> float:
    # SQLite stores -0.0 as 0.0 (Postgres keeps the sign): store 0.0 on both.
    return value + 0.0


StoredFloat = Annotated[float, AfterValidator(_positive_zero)]
"""A float stored in a ``Double`` column; models that hold one refuse NaN and infinities
(``allow_inf_nan=False``), which JSON cannot write."""

NUL = "\x00"


def nul_path(value: object, path: str = "") -> str | None:
    """The dotted path of the first string in ``value`` (dicts, lists) that holds NUL.

    Postgres text and JSON cannot store NUL; SQLite can, but the text then cannot move to
    Postgres, and a task whose step holds one can never be submitted there.
    """
    if isinstance(value, str):
        return path if NUL in value else None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        where = f"{path}.{key}" if path else str(key)
        if isinstance(key, str) and NUL in key:
            return where
        found = nul_path(item, where)
        if found is not None:
            return found
    return None
